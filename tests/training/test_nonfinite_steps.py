"""A training step whose loss or gradient norm is not finite stops the run (exit 2, the last good
checkpoint kept, no final/), or with `train.skip_nonfinite_steps` is skipped and counted."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from toy_tasks import SETTINGS, TRAIN, RegressionTask

from robustvlm.training.checkpoint import list_checkpoints
from robustvlm.training.loop import NonFiniteStep, run_training

BAD_STEP = 5  # 1-based, as the log and the error count steps


class PoisonedTask(RegressionTask):
    """The toy regression whose loss turns NaN (or infinite) at step `BAD_STEP`, gradients too."""

    label = "poisoned"

    def __init__(self, poison: float = math.nan):
        super().__init__()
        self.poison = poison

    def training_step(self, batch, ctx):
        if ctx.step + 1 != BAD_STEP:
            return super().training_step(batch, ctx)
        err = ctx.models["linear"](batch["x"])[:, 0] - batch["y"]
        loss = (err**2).mean() * self.poison
        ctx.backward(loss)
        return {"loss": float(loss.detach()), "hit": 0.0, "calls": float(self.calls)}


def _settings(cfg):
    return {**SETTINGS, "train": cfg.model_dump(mode="json")}


def _log(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("poison", [math.nan, math.inf])
def test_a_nonfinite_step_stops_the_run_keeping_the_last_good_checkpoint(poison, tmp_path):
    run = tmp_path / "run"
    cfg = TRAIN.model_copy(update={"save_every": 2})
    with pytest.raises(NonFiniteStep, match=f"training step {BAD_STEP}: .*not finite") as stop:
        run_training(PoisonedTask(poison), cfg, run, settings=_settings(cfg), progress=False)
    assert "step-000004" in str(stop.value) and "skip_nonfinite_steps" in str(stop.value)
    assert not (run / "final").exists() and not (run / ".final-tmp").exists()
    assert [p.name for p in list_checkpoints(run)] == ["step-000002", "step-000004"]
    weights = load_file(str(run / "checkpoints" / "step-000004" / "model.safetensors"))
    assert all(torch.isfinite(w).all() for w in weights.values())
    assert [r["step"] for r in _log(run)] == [1, 2, 3, 4]


def test_skip_nonfinite_steps_skips_and_counts_them(tmp_path, capsys):
    run = tmp_path / "run"
    cfg = TRAIN.model_copy(update={"skip_nonfinite_steps": True})
    result = run_training(PoisonedTask(), cfg, run, settings=_settings(cfg), progress=False)
    assert result.skipped_steps == 1
    assert "skipped 1 of 10 steps" in capsys.readouterr().out
    weights = load_file(str(run / "final" / "linear.safetensors"))
    assert all(torch.isfinite(w).all() for w in weights.values())
    rows = {r["step"]: r for r in _log(run)}
    assert sorted(rows) == list(range(1, 11))
    assert "loss" not in rows[BAD_STEP] and rows[BAD_STEP]["skipped_steps"] == 1
    assert rows[BAD_STEP - 1]["skipped_steps"] == 0 and rows[10]["skipped_steps"] == 1
    assert all(math.isfinite(r["loss"]) for s, r in rows.items() if s != BAD_STEP)


def test_a_stopped_run_resumes_with_the_skip_option_switched_on(tmp_path):
    run = tmp_path / "run"
    cfg = TRAIN.model_copy(update={"save_every": 2})
    with pytest.raises(NonFiniteStep):
        run_training(PoisonedTask(), cfg, run, settings=_settings(cfg), progress=False)
    skip = cfg.model_copy(update={"skip_nonfinite_steps": True})
    result = run_training(PoisonedTask(), skip, run, settings=_settings(skip), resume=True, progress=False)
    assert result.skipped_steps == 1 and (run / "final" / "linear.safetensors").is_file()
    assert [r["step"] for r in _log(run)] == list(range(1, 11))


def test_rm_train_that_diverges_exits_2_without_final(tmp_path, capsys):
    """A real divergence: a learning rate of 1e30 sends the weights towards float32's limit after
    the first update, so a later step's loss overflows. `rm train` stops at that step."""
    import yaml

    from robustvlm.cli import main

    raw = {
        "model": {"name": "tiny:idefics3", "trainable": "full", "tiny": {"hidden_size": 32, "vocab_size": 300}},
        "data": {"benchmark": "preferences", "n_per_env": 4, "envs": ["short"]},
        "loss": "standard",
        "train": {"steps": 6, "lr": 1e30, "warmup_ratio": 0, "batch_size": 2, "save_every": 1,
                  "keep_checkpoints": 10, "cpu_threads": 1},
    }
    config, run = tmp_path / "rm.yaml", tmp_path / "run"
    config.write_text(yaml.safe_dump(raw))
    assert main(["rm", "train", str(config), "--out", str(run)]) == 2
    err = capsys.readouterr().err
    step = int(err.split("training step ")[1].split(":")[0])
    assert 1 < step <= 6 and "not finite" in err and "Traceback" not in err
    assert not (run / "final").exists()
    assert [p.name for p in list_checkpoints(run)] == [f"step-{s:06d}" for s in range(1, step)]
