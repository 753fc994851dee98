"""`robustvlm embed train`: outputs, the model it writes, resume after a real kill, two processes."""

from __future__ import annotations

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

from robustvlm.config import EmbedRunConfig, validate_config
from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.models.backends import EmbeddingBackend, infer_family, load_backend
from robustvlm.models.embedding import EmbeddingSpec
from robustvlm.workflows.embed.train import embed_train

RAW = {
    "model": {"name": "tiny:idefics3", "tiny": {"hidden_size": 32, "vocab_size": 400}},
    "data": {"benchmark": "tasks", "n_per_env": 6},
    "embed": {"chunk_size": 3, "caption_envs": ["general/caption"]},
    "train": {"steps": 16, "lr": 3e-3, "batch_size": 8, "save_every": 4, "keep_checkpoints": 4, "cpu_threads": 1},
}


def _cfg(raw: dict) -> EmbedRunConfig:
    return validate_config(raw, "test", EmbedRunConfig)


def _log(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]


def _weights(run: Path) -> dict:
    return load_file(str(run / "final" / "model.safetensors"))


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    run = tmp_path_factory.mktemp("embed") / "full"
    return run, embed_train(_cfg(RAW), run, progress=False)


def test_outputs_and_the_model_it_writes(uninterrupted):
    run, result = uninterrupted
    assert result.steps == 16 and result.family == "vlm2vec-mixed"
    rows = _log(run)
    assert [r["step"] for r in rows] == list(range(1, 17)) and {"loss", "grad_norm", "lr"} <= set(rows[0])
    resolved = yaml.safe_load((run / "config.resolved.yaml").read_text())
    assert resolved["embed"]["temperature"] == 0.02 and resolved["model"]["lora"] == {
        "r": 16, "alpha": 64, "dropout": 0.1, "target_modules": None}
    spec = EmbeddingSpec.read(run / "final")
    assert spec.family == "vlm2vec-mixed" and spec.query_style == "question"
    assert infer_family(ModelRef.folder(run / "final")) == "vlm2vec-mixed"
    backend = load_backend(ModelRef.folder(run / "final"))
    assert isinstance(backend, EmbeddingBackend) and backend.supports("image_embed", "text_embed")
    assert not any("lora" in k for k in _weights(run))  # merged


def test_refuses_to_overwrite_a_run_without_resume(uninterrupted):
    run, _ = uninterrupted
    with pytest.raises(ConfigError, match="--resume"):
        embed_train(_cfg(RAW), run, progress=False)


def test_resume_after_kill_matches_uninterrupted_run(uninterrupted, tmp_path):
    """LoRA dropout is on and the batch goes through the gradient cache: the resumed run must
    replay the same batches and random draws to end bit for bit where the uninterrupted one did."""
    full, _ = uninterrupted
    config = tmp_path / "embed.yaml"
    config.write_text(yaml.safe_dump(RAW))
    run = tmp_path / "killed"
    assert kill_after_first_checkpoint(["embed", "train", str(config), "--out", str(run)], run) < 16

    embed_train(_cfg(RAW), run, resume=True, progress=False)
    a, b = _weights(full), _weights(run)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]  # noqa: E731
    assert strip(_log(full)) == strip(_log(run))


@pytest.mark.distributed
def test_two_processes_match_one_process(tmp_path):
    """torchrun, 2 CPU processes x 4 pairs == 1 process x 8: the embeddings are all-gathered with
    the local rows keeping their gradient, the cache replays chunks under DDP's no_sync. (LoRA
    dropout off: each process draws its own masks.) Both sides train the projector, which the
    text-only targets leave unused, so the synchronised chunk must be a query chunk."""
    raw = {**RAW, "model": {**RAW["model"], "trainable": "paper"},
           "train": {**RAW["train"], "steps": 3, "save_every": 3, "lr": 1e-3}}
    single = tmp_path / "single"
    embed_train(_cfg(raw), single, progress=False)
    config = tmp_path / "two.yaml"
    config.write_text(yaml.safe_dump({**raw, "train": {**raw["train"], "batch_size": 4}}))
    torchrun = Path(sys.executable).with_name("torchrun")
    proc = subprocess.run([str(torchrun), "--nproc_per_node", "2", "-m", "robustvlm.cli", "embed", "train",
                           str(config), "--out", str(tmp_path / "two")], capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for a, b in zip(_log(single), _log(tmp_path / "two"), strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-4), a["step"]
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-3), a["step"]
    wa, wb = _weights(single), _weights(tmp_path / "two")
    for name in wa:
        assert torch.allclose(wa[name], wb[name], atol=0.02 * raw["train"]["lr"]), name
