"""The generic training loop: any task, exact resume, the run folder, trackers, checkpoints."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from toy_tasks import SETTINGS, TRAIN, RegressionTask

from robustvlm.config import validate_config
from robustvlm.errors import ConfigError
from robustvlm.models import AnswerModel, build_tiny_vlm, configure_trainable
from robustvlm.models.trainable import enable_gradient_checkpointing
from robustvlm.training.checkpoint import list_checkpoints
from robustvlm.training.loop import run_training


def _log(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]


def test_any_task_trains_and_resumes_exactly(tmp_path):
    full = tmp_path / "full"
    run_training(RegressionTask(), TRAIN, full, settings=SETTINGS, progress=False)
    rows = _log(full)
    assert [r["step"] for r in rows] == list(range(1, 11))
    assert rows[-1]["loss"] < rows[0]["loss"] and rows[-1]["calls"] == 10.0
    assert [p.name for p in list_checkpoints(full)] == ["step-000004", "step-000008", "step-000010"]

    cut = tmp_path / "cut"
    shutil.copytree(full, cut)
    shutil.rmtree(cut / "final")
    for ckpt in list_checkpoints(cut)[1:]:
        shutil.rmtree(ckpt)
    resumed = RegressionTask()
    run_training(resumed, TRAIN, cut, settings=SETTINGS, resume=True, progress=False)
    assert resumed.calls == 10  # the task state came back from step 4, then 6 more calls
    a, b = load_file(str(full / "final" / "linear.safetensors")), load_file(str(cut / "final" / "linear.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]  # noqa: E731
    assert strip(_log(full)) == strip(_log(cut))


def test_run_folder_refuses_overwrite_and_changed_settings(tmp_path):
    run = tmp_path / "run"
    short = TRAIN.model_copy(update={"steps": 2, "save_every": 2})
    run_training(RegressionTask(), short, run, settings={**SETTINGS, "train": short.model_dump()}, progress=False)
    with pytest.raises(ConfigError, match="pass --resume"):
        run_training(RegressionTask(), short, run, settings={**SETTINGS, "train": short.model_dump()}, progress=False)
    changed = short.model_copy(update={"lr": 0.1})
    with pytest.raises(ConfigError, match=r"differs in \['train.lr'\]"):
        run_training(RegressionTask(), changed, run, settings={**SETTINGS, "train": changed.model_dump()},
                     resume=True, progress=False)


def test_tensorboard_tracker_gets_the_logged_rows(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = tmp_path / "run"
    cfg = TRAIN.model_copy(update={"steps": 3, "save_every": 3, "report_to": ["tensorboard"]})
    run_training(RegressionTask(), cfg, run, settings={**SETTINGS, "train": cfg.model_dump()}, progress=False)
    events = list(run.rglob("events.out.tfevents.*"))
    assert events, "no TensorBoard event file was written"
    scalars = {}
    for path in events:
        acc = EventAccumulator(str(path.parent))
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            scalars[tag] = [(e.step, e.value) for e in acc.Scalars(tag)]
    logged = _log(run)
    assert [s for s, _ in scalars["loss"]] == [1, 2, 3]
    assert [v for _, v in scalars["loss"]] == pytest.approx([r["loss"] for r in logged], rel=1e-6)
    assert "lr" in scalars and "grad_norm" in scalars


RAW = {
    "model": {"name": "tiny:idefics3", "trainable": "paper", "tiny": {"hidden_size": 32, "vocab_size": 300}},
    "data": {"benchmark": "spurious", "n_per_env": 16},
    "train": {"steps": 2, "batch_size": 4, "save_every": 2, "cpu_threads": 1},
}


def test_checkpoint_holds_only_trainable_weights_and_rejects_foreign_ones(tmp_path):
    from robustvlm.workflows.finetune.train import train

    run = tmp_path / "run"
    train(validate_config(RAW), run, progress=False)
    ckpt = list_checkpoints(run)[-1]
    saved = load_file(str(ckpt / "model.safetensors"))
    assert saved and not any("vision_model" in k for k in saved)  # frozen in the paper setup
    assert {"optimizer.bin", "random_states_0.pkl", "trainer_state.json"} <= {p.name for p in ckpt.iterdir()}
    saved["vlm.not_a_parameter"] = torch.zeros(1)
    save_file(saved, str(ckpt / "model.safetensors"))
    shutil.rmtree(run / "final")
    cfg = validate_config({**RAW, "train": {**RAW["train"], "steps": 2}})
    with pytest.raises(RuntimeError, match="not_a_parameter"):
        train(cfg, run, resume=True, progress=False)


def test_gradient_checkpointing_leaves_loss_and_gradients_unchanged(tmp_path):
    from robustvlm.data.collate import VLMCollator
    from robustvlm.data.from_config import load_from_config

    cfg = validate_config(RAW)
    examples = [ex for ex in load_from_config(cfg.data, tmp_path, verbose=False) if ex.split == "train"][:4]
    corpus = [t for ex in examples for t in (ex.instruction, ex.target)]

    def loss_and_grads(checkpointing: bool):
        model, processor = build_tiny_vlm("idefics3", corpus=corpus, hidden_size=32, vocab_size=300)
        model = configure_trainable(model, mode="paper")
        if checkpointing:
            enable_gradient_checkpointing(model)
        model.train()
        calls = []
        mlp = model.model.text_model.layers[0].mlp
        inner_forward = mlp.forward
        mlp.forward = lambda *a, **k: calls.append(1) or inner_forward(*a, **k)
        batch = VLMCollator(processor, {}, train=True)(examples)
        loss = AnswerModel(model)(batch).token_ce().mean()
        loss.backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
        return loss.detach(), grads, len(calls)

    loss_plain, grads_plain, runs_plain = loss_and_grads(False)
    loss_ckpt, grads_ckpt, runs_ckpt = loss_and_grads(True)
    assert (runs_plain, runs_ckpt) == (1, 2)  # checkpointing re-runs the layer in the backward pass
    assert torch.allclose(loss_plain, loss_ckpt, atol=1e-6)
    assert grads_plain.keys() == grads_ckpt.keys()
    for name in grads_plain:
        assert torch.allclose(grads_plain[name], grads_ckpt[name], atol=1e-6, rtol=1e-5), name


@pytest.mark.distributed
def test_two_process_fsdp2_run_resumes_exactly(tmp_path):
    """Sharded model and optimizer states (FSDP2, 2 CPU processes): cut a finished run back to
    its first checkpoint; resuming in fresh processes must give the same final weights."""
    import os
    import subprocess
    import sys

    worker = Path(__file__).resolve().parents[1] / "helpers" / "fsdp_resume_worker.py"
    torchrun = Path(sys.executable).with_name("torchrun")

    def launch(out: Path, *extra: str) -> None:
        proc = subprocess.run(
            [str(torchrun), "--nproc_per_node", "2", str(worker), str(out), *extra],
            capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]

    full = tmp_path / "full"
    launch(full)
    assert (full / "distributed_type.txt").read_text() == "FSDP"
    ckpt = list_checkpoints(full)[0]
    assert any(p.is_dir() for p in ckpt.iterdir()), "FSDP writes sharded state folders"
    cut = tmp_path / "cut"
    shutil.copytree(full, cut)
    shutil.rmtree(cut / "final")
    for later in list_checkpoints(cut)[1:]:
        shutil.rmtree(later)
    launch(cut, "--resume")
    a, b = load_file(str(full / "final" / "linear.safetensors")), load_file(str(cut / "final" / "linear.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]  # noqa: E731
    assert strip(_log(full)) == strip(_log(cut))


class _SaveKilledMidway(RegressionTask):
    def save_final(self, final_dir, state_dicts):
        super().save_final(final_dir, state_dicts)  # a loadable model is on disk ...
        raise KeyboardInterrupt  # ... when the kill lands, before the save has finished


def test_a_kill_during_the_final_save_leaves_no_final_folder(tmp_path):
    """Issue 17.12: final/ is written under a temporary name and renamed when complete."""
    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run_training(_SaveKilledMidway(), TRAIN, run, settings=SETTINGS, progress=False)
    assert not (run / "final").exists()
    run_training(RegressionTask(), TRAIN, run, settings=SETTINGS, resume=True, progress=False)
    assert (run / "final" / "linear.safetensors").is_file()
    assert not any(p.name.endswith("-tmp") for p in run.iterdir())


def test_clip_groups_keep_one_models_update_independent_of_the_others_gradient_scale(tmp_path):
    """With a clip norm that binds, a model clipped with another shares its scale: its update
    changes when the other's loss is scaled. Clipped on its own, it does not change at all."""
    from toy_tasks import TwoBranchTask

    cfg = TRAIN.model_copy(update={"steps": 4, "clip_norm": 1e-2, "save_every": 4})

    def trained(scale: float, per_branch: bool, name: str) -> torch.Tensor:
        task = TwoBranchTask(scale, per_branch)
        run_training(task, cfg, tmp_path / name, settings={**SETTINGS, "train": cfg.model_dump()}, progress=False)
        return torch.cat([p.detach().flatten() for p in task.model.parameters()])

    assert torch.equal(trained(1.0, True, "a"), trained(1e3, True, "b"))
    assert not torch.allclose(trained(1.0, False, "c"), trained(1e3, False, "d"))
