"""`robustvlm envs infer`: per-record statistics against a direct computation, an env map that the
loaders read, and every method end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from robustvlm.cli import main
from robustvlm.data.collate import VLMCollator
from robustvlm.data.environments import load_env_map
from robustvlm.data.loaders import load_examples
from robustvlm.workflows.finetune import envs_infer
from robustvlm.workflows.finetune.envs_infer import record_statistics


@pytest.fixture(scope="module")
def spurious(built_in_data) -> Path:
    return built_in_data("spurious", 6) / "data.jsonl"


def test_record_statistics_equal_one_record_at_a_time(tiny_vlms, spurious):
    model, processor = tiny_vlms("idefics3")
    model.eval()
    examples = [ex for ex in load_examples(spurious, verbose=False) if ex.split == "train"][:5]
    stats = record_statistics(model, processor, examples, batch_size=3, progress=False)
    for i, ex in enumerate(examples):
        batch = VLMCollator(processor, {}, train=True)([ex])
        with torch.no_grad():
            logits = model(**{k: v for k, v in batch.items() if k not in ("labels", "env", "ids")}).logits[0, :-1]
        labels = batch["labels"][0, 1:]
        keep = labels != -100
        z, y = logits[keep].double(), labels[keep]
        ce = torch.nn.functional.cross_entropy(z, y, reduction="none")
        # d CE(w z, y)/dw at w = 1 = E_softmax(z)[z] - z_y, by autograd on a dummy scale
        w = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
        (grad,) = torch.autograd.grad(torch.nn.functional.cross_entropy(w * z, y), [w])
        assert stats["loss"][i] == pytest.approx(float(ce.mean()), rel=1e-4)
        assert stats["scale_grad"][i] == pytest.approx(float(grad), rel=1e-3, abs=1e-5)


@pytest.mark.parametrize("method", ["eiil", "loss-split", "cluster"])
def test_envs_infer_writes_an_env_map_the_loaders_read(method, spurious, tmp_path, capsys, monkeypatch):
    out = tmp_path / method
    if method == "eiil":  # the untrained tiny model's scale gradients share one sign: give it mixed ones
        real = envs_infer.record_statistics

        def mixed(*args, **kwargs):
            stats = real(*args, **kwargs)
            stats["scale_grad"] = stats["scale_grad"] - np.median(stats["scale_grad"])
            return stats

        monkeypatch.setattr(envs_infer, "record_statistics", mixed)
    assert main(["envs", "infer", "--model", "tiny:idefics3", "--data", str(spurious), "--out", str(out),
                 "--method", method, "--batch-size", "4"]) == 0
    assert "env map:" in capsys.readouterr().out
    rows = [json.loads(line) for line in (out / "inferred.jsonl").read_text().splitlines()]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records"] == len(rows) and sum(summary["sizes"].values()) == len(rows)
    load_env_map(out / "env_map.yaml")
    remapped = load_examples(spurious, env_map=out / "env_map.yaml", verbose=False)
    inferred = {r["id"]: r["inferred"] for r in rows}
    for ex in remapped:
        if ex.id in inferred:
            assert ex.env == inferred[ex.id]
        else:
            assert not ex.env.startswith("inferred-")  # test records keep their own environment
    assert main(["data", "check", str(spurious), "--env-map", str(out / "env_map.yaml")]) == 0
    if method == "loss-split":
        losses = np.array([r["loss"] for r in rows])
        high = np.array([r["inferred"] == "inferred-1" for r in rows])
        assert losses[high].min() > losses[~high].max()


def test_eiil_on_an_untrained_reference_is_one_clear_error(spurious, tmp_path, capsys):
    assert main(["envs", "infer", "--model", "tiny:idefics3", "--data", str(spurious), "--out",
                 str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "ERM fine-tune" in err and "Traceback" not in err
