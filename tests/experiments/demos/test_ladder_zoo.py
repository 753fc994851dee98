"""`demo ladder --zoo`: the ladder's VLM rungs from a pretrained zoo member (the quick zoo's
`quick-idefics3`, built in a temporary cache): the member loads without the tiny models' options,
is the same in every seed, keeps its own processor, and the demo reports its zero-shot readings."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch
from report_checks import without_data_read

from robustvlm.cli import main
from robustvlm.errors import ConfigError
from robustvlm.experiments.ladder import vlm as ladder_vlm
from robustvlm.experiments.ladder.plan import FULL, QUICK, ZOO, ZOO_QUICK
from robustvlm.experiments.ladder.results import LadderResults
from robustvlm.experiments.ladder.run import checked_plan, run_one
from robustvlm.experiments.ladder.rung import Rung
from robustvlm.experiments.ladder.vlm import answer_rows, build_vlm, environment_rows
from robustvlm.figures.registry import OWN_TEST_FIGURES
from robustvlm.figures.write import main as figures_main
from robustvlm.figures.write import render
from robustvlm.model_ref import ModelRef
from robustvlm.models.answer import AnswerModel
from robustvlm.models.loading import load_vlm
from robustvlm.objectives import build_objective
from robustvlm.report.figure_blocks import read_figure
from robustvlm.training.answer_fit import candidate_correct

MEMBER = "zoo:quick-idefics3"
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def zoo_cache(quick_zoo):
    return quick_zoo("quick-idefics3")


def _ids(plan):
    return tuple((source, rung.id) for source, rung in plan.cells)


def test_the_zoo_plan_names_vlm_members_and_modes_only():
    assert _ids(ZOO) == tuple(("fashion", f"vlm:{m}:zoo:idefics3-siglip-m") for m in ("head", "lora", "full"))
    assert _ids(replace(ZOO_QUICK, modes=("full",))) == (("fashion", "vlm:full:zoo:quick-idefics3"),)
    assert _ids(checked_plan(replace(ZOO, members=("idefics3-siglip-m", "quick-idefics3"), modes=("full",)))) == (
        ("fashion", "vlm:full:zoo:idefics3-siglip-m"), ("fashion", "vlm:full:zoo:quick-idefics3"))
    with pytest.raises(ConfigError, match="dual encoder"):
        checked_plan(replace(ZOO, members=("clip-m",)))
    with pytest.raises(ConfigError, match="unknown VLM rung mode"):
        checked_plan(replace(ZOO, modes=("frozen",)))
    with pytest.raises(ConfigError, match="unknown zoo member"):
        checked_plan(replace(ZOO, members=("no-such-member",)))


@pytest.mark.slow
def test_a_zoo_member_is_the_same_pretrained_model_in_every_seed(zoo_cache, monkeypatch):
    monkeypatch.setenv("ROBUSTVLM_CACHE", str(zoo_cache))
    pretrained, own = load_vlm(ModelRef.parse(MEMBER))
    for mode in ("head", "full"):
        first, processor = build_vlm(Rung.vlm(mode, ModelRef.parse(MEMBER)), 0, "fashion", 16)
        second, _ = build_vlm(Rung.vlm(mode, ModelRef.parse(MEMBER)), 1, "fashion", 16)
        assert type(processor) is type(own) and processor.tokenizer.get_vocab() == own.tokenizer.get_vocab()
        base = {k: v for k, v in pretrained.state_dict().items()}
        for model in (first, second):  # the pretrained weights, whatever the seed (a LoRA starts at zero)
            weights = {k.replace("base_model.model.", "").replace(".base_layer", "").replace(".original_module", ""): v
                       for k, v in model.state_dict().items() if "lora_" not in k and "modules_to_save" not in k}
            assert all(torch.equal(weights[k], v) for k, v in base.items() if k in weights)
            assert len([k for k in base if k in weights]) == len(base)
        if mode == "head":  # the seed sets the LoRA's initial weights
            lora = [k for k, _ in first.named_parameters() if "lora_A" in k]
            assert lora and not torch.equal(first.get_parameter(lora[0]), second.get_parameter(lora[0]))


@pytest.mark.slow
def test_kept_rows_follow_the_model(zoo_cache, monkeypatch):
    monkeypatch.setenv("ROBUSTVLM_CACHE", str(zoo_cache))
    monkeypatch.setattr(ladder_vlm, "_KEPT_ROWS", {})
    rng = np.random.default_rng(0)
    inputs = {"train-0.9": rng.random((3, 2 * 14 * 14)).astype(np.float32)}
    labels = {"train-0.9": np.array([0, 1, 0])}
    _, tiny = build_vlm(Rung.vlm("full", ModelRef.tiny("idefics3")), 0, "fashion", 32)
    _, zoo = build_vlm(Rung.vlm("full", ModelRef.parse(MEMBER)), 0, "fashion", 32)
    env = {"train-0.9": 0}
    kept_tiny = environment_rows(tiny, "fashion", 32, inputs, labels, env, ModelRef.tiny("idefics3"))
    kept_zoo = environment_rows(zoo, "fashion", 32, inputs, labels, env, ModelRef.parse(MEMBER))
    fresh = answer_rows(zoo, "fashion", inputs["train-0.9"], labels["train-0.9"], env, "train-0.9")
    assert kept_zoo is not kept_tiny  # the same pictures, another processor: not the tiny model's rows
    assert all(torch.equal(kept_zoo["train-0.9"].batch[k], fresh.batch[k]) for k in fresh.batch)


@pytest.fixture(scope="module")
def quick_run(zoo_cache, tmp_path_factory):
    out = tmp_path_factory.mktemp("ladder_zoo")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ROBUSTVLM_CACHE", str(zoo_cache))
        assert main(["demo", "ladder", "--zoo", "--quick", "--out", str(out)]) == 0
    return out


@pytest.mark.slow
def test_quick_zoo_ladder_runs_reports_and_reads_back(quick_run, zoo_cache, monkeypatch):
    monkeypatch.setenv("ROBUSTVLM_CACHE", str(zoo_cache))
    out = quick_run
    saved = json.loads((out / "results.json").read_text())
    results = LadderResults.from_dict(saved)
    assert json.loads(json.dumps(results.to_dict())) == without_data_read(saved)
    assert set(results.summary) == {"fashion/vlm:head:zoo:quick-idefics3", "fashion/vlm:full:zoo:quick-idefics3"}
    assert all(len(entries) == 6 for entries in results.summary.values())  # five objectives and the oracle
    zero = results.zero_shot[f"fashion/{MEMBER}"]
    assert set(zero.ladder_noisy) == {"coloured", "grey"} and set(zero.ten_way["grey"]) == set(results.test_envs)
    # the ladder question's zero-shot accuracy, recomputed from the member's own first-token logits
    from robustvlm.data.colored_mnist import colored_mnist

    env = colored_mnist("fashion", seed=0, limit=results.plan.vlm.per_env, test_pictures=results.plan.test_pictures)[-1]
    model, processor = load_vlm(ModelRef.parse(MEMBER))
    rows = answer_rows(processor, "fashion", env.inputs.reshape(len(env.inputs), -1), env.labels,
                       {env.name: 0}, env.name)
    model.eval()
    with torch.no_grad():
        logits = model(**{k: v for k, v in rows.batch.items() if k not in ("labels", "env")}).logits
    first = (rows.batch["labels"] != -100).int().argmax(1) - 1  # the position predicting the answer's first token
    picked = logits[torch.arange(len(first)), first][:, rows.candidates].argmax(1).numpy()
    assert zero.ladder_noisy["coloured"][env.name] == pytest.approx(float((picked == env.labels).mean()))
    assert candidate_correct(AnswerModel(model), rows).mean() == pytest.approx((picked == env.labels).mean())
    report = (out / "report.md").read_text()
    assert "Before fine-tuning" in report and "the pretrained `zoo:quick-idefics3`" in report


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in OWN_TEST_FIGURES if n.startswith("ladder-zoo")])
def test_quick_figures_in_the_docs_are_what_the_code_produces(quick_run, name):
    documented = read_figure((ROOT / "docs" / "quick_figures.md").read_text(encoding="utf-8"), name)
    assert render(name, quick_run) == documented, (
        f"docs/quick_figures.md's {name} table differs from what the code produces now; if the change "
        "is intended, rewrite it with `python -m robustvlm.figures`")


def test_the_zoo_plan_runs_dynamic_birm_with_the_risks_averaged_and_the_tiny_rungs_keep_the_papers():
    from robustvlm.experiments.ladder.run import vlm_hparams

    for plan in (ZOO, ZOO_QUICK):
        hparams = vlm_hparams(plan.vlm)["dynamic_birm"]
        assert hparams == {"k_skip": plan.vlm.anneal, "smooth": "risks"}
        assert build_objective("dynamic_birm", ["a", "b"], hparams).controller.smooth == "risks"
    assert FULL.vlm.dynamic_birm_smooth == QUICK.vlm.dynamic_birm_smooth == "lambda"
    assert vlm_hparams(FULL.vlm)["irm"] == vlm_hparams(ZOO.vlm)["irm"]


def test_a_subset_of_methods_and_seeds_keeps_the_runs_keys():
    from robustvlm.experiments.ladder.run import run_plan
    from robustvlm.workflows.launchers import _job_key

    plan = replace(ZOO, modes=("full",))
    subset = checked_plan(replace(plan, methods=("dynamic_birm", "erm"), seeds=(3, 4, 4)))
    assert subset.methods == ("erm", "dynamic_birm") and subset.seeds == (3, 4)
    job = ("fashion", plan.cells[0][1], "erm", 3, "given")
    keys = {_job_key(partial(run_one, plan=run_plan(p), features=Path("f")), job)
            for p in (plan, subset, checked_plan(replace(plan, methods=("erm",))))}
    assert len(keys) == 1
    changed = replace(plan, vlm=replace(plan.vlm, dynamic_birm_smooth="lambda"))
    assert _job_key(partial(run_one, plan=run_plan(changed), features=Path("f")), job) not in keys
    with pytest.raises(ConfigError, match="unknown method"):
        checked_plan(replace(plan, methods=("erm", "groupdro")))


@pytest.mark.slow
def test_the_pages_picture_is_the_ladders_own_drawn_again_from_results_json(quick_run, tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- figure:ladder-zoo:quick -->\n<!-- /figure:ladder-zoo:quick -->\n")
    assert figures_main([str(doc), f"ladder-zoo:quick={quick_run}", "--images", str(tmp_path / "images")]) == 0
    assert (tmp_path / "images" / "ladder-zoo-quick.png").read_bytes() == (quick_run / "ladder.png").read_bytes()
