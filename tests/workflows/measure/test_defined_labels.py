"""`robustvlm icl defined-labels` end to end on a tiny VLM: one record per (cell, trial), the
summary against counts of the records, the prediction against an independent log-likelihood
computation, a killed run resumed without redoing finished cells, and unpaired suites refused."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from robustvlm.data.images import load_image
from robustvlm.data.synth import synthesize
from robustvlm.errors import DataError
from robustvlm.model_ref import ModelRef
from robustvlm.models.loading import load_vlm
from robustvlm.workflows.measure import defined_labels as run
from robustvlm.workflows.measure.icl_eval import load_domains
from robustvlm.workflows.zoo import defined_labels as dl
from robustvlm.workflows.zoo.data import demonstration_messages


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    root = tmp_path_factory.mktemp("suite")
    synthesize("domains", root, n_per_env=2)
    return root / "shapes"


@pytest.mark.slow
def test_records_and_summary_agree_and_a_killed_run_resumes(shapes, tmp_path, monkeypatch):
    kwargs = dict(query_domain="photo", demo_domains=("photo", "sketch"), trials=4, seed=0)
    summary = run.run_defined_labels(ModelRef.parse("tiny:llava"), shapes, tmp_path / "whole", **kwargs)
    records = [json.loads(line) for line in (tmp_path / "whole" / run.RECORDS_FILE).read_text().splitlines()]
    assert [r["demos"] for r in records] == ["none"] * 4 + ["photo"] * 4 + ["sketch"] * 4
    cells = {c["demos"]: c for c in summary["cells"]}
    assert json.loads((tmp_path / "whole" / run.RESULTS_FILE).read_text())["machine"]["torch"]["threads"] >= 1
    for name, cell in cells.items():
        right = [r["correct"] for r in records if r["demos"] == name]
        assert cell["correct"] == sum(right) and cell["accuracy"] == pytest.approx(np.mean(right))
        assert cell["ci"][0] <= cell["accuracy"] <= cell["ci"][1]
    assert cells["none"]["gain"] is None and cells["photo"]["cost"] is None
    assert cells["sketch"]["cost"]["difference"] == pytest.approx(cells["photo"]["accuracy"] - cells["sketch"]["accuracy"])
    assert "| sketch | 4 |" in (tmp_path / "whole" / "defined_labels.md").read_text()

    # a kill in the third cell: the finished cells are kept, only the third is scored again
    log = tmp_path / "whole" / run.RECORDS_FILE
    log.write_text("".join(json.dumps(r) + "\n" for r in records[:10]))
    scored: list[int] = []
    real = run.score_trials
    monkeypatch.setattr(run, "score_trials", lambda *a, **k: scored.append(len(a[2])) or real(*a, **k))
    resumed = run.run_defined_labels(ModelRef.parse("tiny:llava"), shapes, tmp_path / "whole", **kwargs, resume=True)
    assert scored == [4] and resumed["cells"] == summary["cells"]
    assert [json.loads(line) for line in log.read_text().splitlines()] == records


def test_the_prediction_is_the_word_of_largest_likelihood_by_an_independent_computation(shapes):
    model, processor = load_vlm(ModelRef.parse("tiny:llava"))
    items = run.suite_items(load_domains(shapes))
    trials = dl.draw_trials([len(c) for c in items["photo"]], 3, n_ways=2, seed=1)

    def picture(c: int, i: int):
        return load_image(items["photo"][c][i].image)

    records = dl.score_trials(model, processor, trials, picture, picture)
    for trial, record in zip(trials, records):
        allowed = sorted(set(trial.words))
        messages = demonstration_messages(dl.defined_label_question(allowed), list(trial.words))
        prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        images = [picture(*d) for d in trial.demos] + [picture(*trial.query)]
        totals = []
        for word in allowed:  # the prompt and the word as one sequence, no cache, no sharing
            word_ids = processor.tokenizer(word, add_special_tokens=False)["input_ids"]
            batch = processor(text=[prompt], images=[images], return_tensors="pt")
            ids = torch.cat([batch["input_ids"], torch.tensor([word_ids])], dim=1)
            mask = torch.ones_like(ids)
            with torch.no_grad():
                logits = model(**{**batch, "input_ids": ids, "attention_mask": mask}).logits[0].log_softmax(-1)
            start = batch["input_ids"].shape[1]
            totals.append(sum(float(logits[start + j - 1, t]) for j, t in enumerate(word_ids)))
        assert record["prediction"] == allowed[int(np.argmax(totals))]
        assert record["correct"] == (record["prediction"] == trial.answer)


def test_an_unpaired_suite_is_refused(shapes, tmp_path):
    examples = [ex for ex in load_domains(shapes) if not (ex.env == "sketch" and ex.image.endswith("0001.png"))]
    with pytest.raises(DataError, match="domain 'sketch' holds .* pictures per class.*must pair item by item"):
        run.suite_items(examples)
    with pytest.raises(DataError, match="no domain 'clean' in the suite"):
        run.run_defined_labels(ModelRef.parse("tiny:llava"), shapes, tmp_path / "x", query_domain="clean")
