"""Dynamic BIRM under gradient accumulation: one lambda update per optimizer step, exact resume."""

import json
import shutil

import pytest
from safetensors.torch import load_file

from robustvlm.config import validate_config
from robustvlm.workflows.finetune.train import train

ALPHA, K_SKIP = 0.6, 2
RAW = {
    "model": {"name": "tiny:idefics3", "trainable": "full",
              "tiny": {"hidden_size": 32, "vocab_size": 300}},
    "data": {"benchmark": "spurious", "n_per_env": 24},
    "method": "dynamic_birm",
    "method_args": {"k_skip": K_SKIP, "alpha": ALPHA},
    "train": {"steps": 8, "lr": 3e-3, "batch_size": 4, "grad_accum": 3, "save_every": 4,
              "cpu_threads": 1, "keep_checkpoints": 3},
}


def log_rows(run):
    return [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]


def test_lambda_advances_once_per_optimizer_step_and_resumes_exactly(tmp_path):
    full = tmp_path / "full"
    train(validate_config(RAW), full, progress=False)
    rows = log_rows(full)
    assert [r["step"] for r in rows] == list(range(1, 9))
    previous = 0.0
    for r in rows:
        if r["step"] <= K_SKIP:  # logged step s is optimizer step s - 1
            assert r["lambda"] == 0.0
            continue
        # one update per step: lambda_t = alpha lambda_{t-1} + (1 - alpha) lambda_target_t;
        # an update per micro-batch (3 per step) would not satisfy it.
        expected = ALPHA * previous + (1 - ALPHA) * r["lambda_target"]
        assert r["lambda"] == pytest.approx(expected, rel=1e-9), r["step"]
        previous = r["lambda"]

    cut = tmp_path / "cut"
    shutil.copytree(full, cut)
    shutil.rmtree(cut / "final")
    shutil.rmtree(cut / "checkpoints" / "step-000008")
    train(validate_config(RAW), cut, resume=True, progress=False)
    a = load_file(str(full / "final" / "model.safetensors"))
    b = load_file(str(cut / "final" / "model.safetensors"))
    assert all((a[k] == b[k]).all() for k in a), "weights differ after resume"
    strip = lambda rs: [{k: v for k, v in r.items() if k != "seconds"} for r in rs]  # noqa: E731
    assert strip(log_rows(full)) == strip(log_rows(cut))
