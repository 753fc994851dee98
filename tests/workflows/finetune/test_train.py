"""End-to-end training and evaluation on built-in data, including resume after a real kill."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from kill_run import kill_after_first_checkpoint
from safetensors.torch import load_file

from robustvlm.config import validate_config
from robustvlm.data.from_config import load_from_config
from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.models.backends import VLMBackend
from robustvlm.workflows.finetune.evaluate import evaluate
from robustvlm.workflows.finetune.train import train

RAW = {
    "model": {"name": "tiny:idefics3", "trainable": "full",
              "tiny": {"hidden_size": 32, "vocab_size": 300}},
    "data": {"benchmark": "spurious", "n_per_env": 24},
    "method": "erm",
    "train": {"steps": 40, "lr": 3e-3, "batch_size": 4, "save_every": 4, "cpu_threads": 1,
              "keep_checkpoints": 3},
    "eval": {"batch_size": 8, "max_new_tokens": 6, "max_per_env": 4},
}


def final_weights(run: Path) -> dict:
    return load_file(str(run / "final" / "model.safetensors"))


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    run = tmp_path_factory.mktemp("full")
    result = train(validate_config(RAW), run, progress=False)
    return run, result


def test_run_outputs(uninterrupted):
    run, result = uninterrupted
    assert result.steps == 40 and result.env_names == ["train-0.8", "train-0.9"]
    rows = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 41))
    assert {"loss", "R_emp", "R_inv", "lambda", "P", "lr", "seconds", "risk/train-0.9"} <= set(rows[0])
    assert rows[-1]["loss"] < rows[0]["loss"]  # it learns something
    assert rows[3]["lr"] > rows[0]["lr"] and rows[-1]["lr"] < rows[20]["lr"]  # warm-up, then cosine decay
    resolved = yaml.safe_load((run / "config.resolved.yaml").read_text())
    assert resolved["train"]["steps"] == 40 and resolved["eval"]["repetition_penalty"] == 1.0
    assert (run / "final" / "config.json").is_file()
    assert len(list((run / "checkpoints").glob("step-*"))) == 3


def test_refuses_to_overwrite_a_run_without_resume(uninterrupted):
    run, _ = uninterrupted
    with pytest.raises(ConfigError, match="--resume"):
        train(validate_config(RAW), run, progress=False)


def test_resume_after_kill_matches_uninterrupted_run(uninterrupted, tmp_path):
    full_run, _ = uninterrupted
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(RAW))
    run = tmp_path / "killed"
    assert kill_after_first_checkpoint(["train", str(config), "--out", str(run)], run) < 40

    train(validate_config(RAW), run, resume=True, progress=False)
    a, b = final_weights(full_run), final_weights(run)
    assert a.keys() == b.keys()
    for name in a:
        assert (a[name] == b[name]).all(), f"{name} differs after resume"
    steps = [json.loads(line)["step"] for line in (run / "train_log.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 41))


def test_evaluate_writes_metrics_and_resumes(uninterrupted, tmp_path, monkeypatch):
    run, result = uninterrupted
    cfg = validate_config(RAW)
    examples = load_from_config(cfg.data, run, verbose=False)
    out = tmp_path / "eval"
    metrics = evaluate(ModelRef.folder(result.final_dir), examples, out, cfg=cfg.eval, progress=False)
    assert metrics.n == 16 and set(metrics.per_env) == {
        "train-0.9", "train-0.8", "test-reversed", "test-nocolour"}
    assert metrics.per_env["test-reversed"].ood is True
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert {"id", "env", "ood", "prediction", "target", "scores"} <= set(rows[0])
    id_envs = [v.scores["chrf"] for v in metrics.per_env.values() if not v.ood]
    assert metrics.id["chrf"] == pytest.approx(sum(id_envs) / len(id_envs))

    # Simulate a kill: keep 10 rows and a torn line; a resumed run generates only the 6 missing.
    lines = (out / "predictions.jsonl").read_text().splitlines()
    (out / "predictions.jsonl").write_text("\n".join(lines[:10]) + '\n{"id": "tor')
    generated = []
    real = VLMBackend.generate_chats

    def counting(self, prompts, **kw):
        generated.extend(p.record for p in prompts)
        return real(self, prompts, **kw)

    monkeypatch.setattr(VLMBackend, "generate_chats", counting)
    again = evaluate(ModelRef.folder(result.final_dir), examples, out, cfg=cfg.eval, resume=True, progress=False)
    assert len(generated) == 6
    assert again == metrics


@pytest.mark.distributed
def test_two_processes_match_one_process(tmp_path):
    """torchrun with 2 CPU processes x 4 examples == 1 process x 8 (same global batches)."""
    raw = {**RAW, "method": "dynamic_birm", "method_args": {"k_skip": 2},
           "train": {**RAW["train"], "steps": 6, "save_every": 6, "batch_size": 8}}
    single = tmp_path / "single"
    train(validate_config(raw), single, progress=False)

    config = tmp_path / "two.yaml"
    config.write_text(yaml.safe_dump({**raw, "train": {**raw["train"], "batch_size": 4}}))
    launcher = Path(sys.executable).with_name("torchrun")
    proc = subprocess.run([str(launcher), "--nproc_per_node", "2", "-m", "robustvlm.cli", "train",
                           str(config), "--out", str(tmp_path / "two")], capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600)
    assert proc.returncode == 0, "\n".join(line for line in proc.stderr.splitlines() if "error" in line.lower())[-3000:]
    one_log = [json.loads(x) for x in (single / "train_log.jsonl").read_text().splitlines()]
    two_log = [json.loads(x) for x in (tmp_path / "two" / "train_log.jsonl").read_text().splitlines()]
    for a, b in zip(one_log, two_log, strict=True):
        for key in ("R_emp", "R_inv", "lambda", "P"):
            assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), (a["step"], key)
    # Adam divides by the root of the squared gradients, so the reduce-order rounding of a
    # near-zero gradient component can move its weight by a visible fraction of one step:
    # allow 2% of one step (lr) per weight.
    wa, wb = final_weights(single), final_weights(tmp_path / "two")
    for name in wa:
        assert torch.allclose(wa[name], wb[name], atol=0.02 * raw["train"]["lr"]), name


@pytest.mark.parametrize("method,args", [
    ("irm", {"anneal_steps": 3, "lambda": 10.0}),
    ("vrex", {"anneal_steps": 3}),
    ("groupdro", {}),
    ("birm", {"anneal_steps": 3}),
    ("dynamic_birm", {"k_skip": 3}),
])
def test_every_method_resumes_exactly(tmp_path, method, args):
    """Cut a finished run back to its middle checkpoint; resuming must reproduce it bit for bit."""
    import shutil

    raw = {**RAW, "method": method, "method_args": args,
           "train": {**RAW["train"], "steps": 12, "save_every": 6, "keep_checkpoints": 3}}
    full = tmp_path / "full"
    train(validate_config(raw), full, progress=False)
    cut = tmp_path / "cut"
    shutil.copytree(full, cut)
    shutil.rmtree(cut / "final")
    shutil.rmtree(cut / "checkpoints" / "step-000012")
    train(validate_config(raw), cut, resume=True, progress=False)
    a, b = final_weights(full), final_weights(cut)
    assert all((a[k] == b[k]).all() for k in a), f"{method}: weights differ after resume"
    log_a = [json.loads(x) for x in (full / "train_log.jsonl").read_text().splitlines()]
    log_b = [json.loads(x) for x in (cut / "train_log.jsonl").read_text().splitlines()]
    strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]  # noqa: E731
    assert strip(log_a) == strip(log_b)
