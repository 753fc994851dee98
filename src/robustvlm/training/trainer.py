"""The training loop: one objective, Accelerate for devices and processes, exact resume.

Outputs in the run directory:
  config.resolved.yaml   every setting, defaults filled in
  base/                  the initial model + processor (tiny models only: built once, reused on resume)
  train_log.jsonl        one row per optimizer step (loss, R_emp, R_inv, lambda, P, risk/<env>, lr, seconds)
  checkpoints/step-N/    see training/checkpoint.py
  final/                 the fine-tuned model + processor (save_pretrained format)
  skipped.jsonl          records skipped under data.on_bad_record: skip
"""

from __future__ import annotations

import json
import math
import shutil
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from tqdm.auto import tqdm
from transformers import get_cosine_schedule_with_warmup

from robustvlm.config import RunConfig, dump_config
from robustvlm.data.collate import VLMCollator
from robustvlm.data.from_config import load_from_config, materialize, training_examples
from robustvlm.data.records import Example, SkipLog
from robustvlm.errors import ConfigError
from robustvlm.models.answer import AnswerModel
from robustvlm.models.loading import load_vlm
from robustvlm.models.trainable import configure_trainable, count_parameters
from robustvlm.objectives import Objective, build_objective
from robustvlm.training.checkpoint import list_checkpoints, load_checkpoint, save_checkpoint
from robustvlm.training.sampler import EnvBalancedBatchSampler, ShuffleBatchSampler


@dataclass
class TrainResult:
    """Where a finished run left its outputs."""

    out_dir: Path
    final_dir: Path
    steps: int
    env_names: list[str]


def _use_bf16(setting: Any) -> bool:
    if setting == "auto":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return bool(setting)


def _base_model(cfg: RunConfig, out_dir: Path, train: list[Example], is_main: bool, accelerator: Accelerator):
    """Load the model to fine-tune; a tiny model is built once into `out_dir/base` and reused.

    The base folder is written under a temporary name and renamed, so a killed run never leaves a
    half-written one; every process waits for it before loading.
    """
    name = cfg.model.name
    if name.startswith("tiny:"):
        base = out_dir / "base"
        if is_main and not base.is_dir():
            corpus = [t for ex in train for t in (ex.instruction, ex.target)]
            model, processor = load_vlm(name, tiny_options=cfg.model.tiny, corpus=corpus)
            tmp = out_dir / ".base-tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            model.save_pretrained(tmp)
            processor.save_pretrained(tmp)
            tmp.rename(base)
        accelerator.wait_for_everyone()
        name = str(base)
    return load_vlm(name, trust_remote_code=cfg.model.trust_remote_code)


def _make_sampler(
    cfg: RunConfig, train: list[Example], env_ids: dict[str, int], accelerator: Accelerator
):
    kw = dict(
        seed=cfg.train.seed, rank=accelerator.process_index, world_size=accelerator.num_processes
    )
    global_batch = cfg.train.batch_size * accelerator.num_processes
    if cfg.train.sampler == "shuffle":
        return ShuffleBatchSampler(len(train), batch_size=global_batch, **kw)
    n_envs = len(env_ids)
    if n_envs < 2:
        raise ConfigError(
            "train.sampler: balanced needs at least two training environments; use shuffle"
        )
    envs_per_batch = min(n_envs, max(2, global_batch // 2))
    if global_batch % envs_per_batch:
        raise ConfigError(
            f"train.batch_size: a balanced global batch of {global_batch} cannot hold the same number "
            f"of examples from {envs_per_batch} environments; pick a multiple of {envs_per_batch}"
        )
    return EnvBalancedBatchSampler(
        [env_ids[ex.env] for ex in train],
        per_env=global_batch // envs_per_batch,
        envs_per_batch=envs_per_batch,
        **kw,
    )


def _batch_stream(sampler):
    """Endless stream of index lists, epoch after epoch, starting where the sampler's state says."""
    while True:
        yield from sampler


def _to_device(batch: dict[str, Any], device: torch.device) -> dict[str, Any]:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def _truncate_log(path: Path, last_step: int) -> None:
    """Drop log rows written after the checkpoint we resume from."""
    if not path.is_file():
        return
    rows = [
        line
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() and json.loads(line)["step"] <= last_step
    ]
    path.write_text("".join(r + "\n" for r in rows), encoding="utf-8")


def _reset_optimizer_state(optimizer: torch.optim.Optimizer) -> None:
    getattr(optimizer, "optimizer", optimizer).state.clear()


def build_run_objective(cfg: RunConfig, env_names: list[str]) -> Objective:
    """The configured objective; a bad method or hyperparameter becomes a ConfigError."""
    try:
        return build_objective(cfg.method, env_names, cfg.method_args)
    except ValueError as err:
        raise ConfigError(f"method/method_args: {err}") from None


def train(
    cfg: RunConfig, out_dir: str | Path, *, resume: bool = False, progress: bool = True
) -> TrainResult:
    """Fine-tune `cfg.model` with `cfg.method` on the in-domain training records; see module doc."""
    out_dir = Path(out_dir)
    # cpu=True lets Accelerate see a torchrun launch as multi-process on a machine without a GPU.
    accelerator = Accelerator(
        mixed_precision="bf16" if _use_bf16(cfg.train.bf16) else "no", cpu=not torch.cuda.is_available()
    )
    if cfg.train.cpu_threads and accelerator.device.type == "cpu":
        torch.set_num_threads(cfg.train.cpu_threads)
    is_main = accelerator.is_main_process
    if is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
        if not resume and list_checkpoints(out_dir):
            raise ConfigError(
                f"{out_dir} already holds checkpoints: pass --resume or choose another --out"
            )
        dump_config(cfg, out_dir / "config.resolved.yaml")
        materialize(cfg.data, out_dir)  # a built-in benchmark is written once, by one process
    accelerator.wait_for_everyone()

    skips = SkipLog()
    examples = load_from_config(cfg.data, out_dir, skips, verbose=is_main)
    train_set = training_examples(examples, cfg.data.max_train_per_env)
    if not train_set:
        raise ConfigError("data: no in-domain training records (split 'train', ood false)")
    if is_main and len(skips):
        skips.write(out_dir / "skipped.jsonl")
        print(f"skipped {len(skips)} bad record(s): see {out_dir / 'skipped.jsonl'}")
    env_names = sorted({ex.env for ex in train_set})
    env_ids = {name: i for i, name in enumerate(env_names)}
    objective = build_run_objective(cfg, env_names)

    set_seed(cfg.train.seed)
    model, processor = _base_model(cfg, out_dir, train_set, is_main, accelerator)
    model = configure_trainable(model, mode=cfg.model.trainable, lora=cfg.model.lora.model_dump())
    n_trainable, n_total = count_parameters(model)
    sampler = _make_sampler(cfg, train_set, env_ids, accelerator)
    steps_per_epoch = max(1, len(sampler) // cfg.train.grad_accum)
    total = cfg.train.steps or max(1, math.ceil(cfg.train.epochs * steps_per_epoch))

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
    scheduler = get_cosine_schedule_with_warmup(
        optimizer, int(cfg.train.warmup_ratio * total), total
    )
    wrapped, optimizer = accelerator.prepare(AnswerModel(model), optimizer)
    collator = VLMCollator(processor, env_ids, train=True)

    start, elapsed = 0, 0.0
    log_path = out_dir / "train_log.jsonl"
    checkpoints = list_checkpoints(out_dir) if resume else []
    if checkpoints:
        state = load_checkpoint(checkpoints[-1], model, optimizer, scheduler)
        start, elapsed = state["step"], state["seconds"]
        sampler.load_state_dict(state["sampler"])
        objective.load_state_dict(state["objective"])
        if is_main:
            _truncate_log(log_path, start)
            print(f"resuming from {checkpoints[-1].name} (step {start} of {total})")
    elif is_main:
        log_path.unlink(missing_ok=True)
        print(
            f"training {cfg.model.name} with {cfg.method}: {n_trainable:,} of {n_total:,} parameters "
            f"trainable, {len(train_set)} examples in {len(env_names)} environments, {total} steps"
        )

    stream = _batch_stream(sampler)
    wrapped.train()
    bar = tqdm(
        total=total, initial=start, disable=not (progress and is_main), desc=cfg.method, unit="step"
    )
    t0 = time.perf_counter() - elapsed
    with log_path.open("a", encoding="utf-8") if is_main else nullcontext() as log:
        for step in range(start, total):
            if objective.resets_optimizer_at(step):
                _reset_optimizer_state(optimizer)
            for micro in range(cfg.train.grad_accum):
                batch = _to_device(
                    collator([train_set[i] for i in next(stream)]), accelerator.device
                )
                sync = (
                    nullcontext()
                    if micro == cfg.train.grad_accum - 1
                    else accelerator.no_sync(wrapped)
                )
                with sync, accelerator.autocast():
                    parts = objective(wrapped(batch), step)
                    accelerator.backward(parts.loss / cfg.train.grad_accum)
            grad_norm = accelerator.clip_grad_norm_(params, cfg.train.clip_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            done = step + 1
            if is_main and (done % cfg.train.log_every == 0 or done == total):
                row = {
                    "step": done,
                    **parts.log_row(),
                    "grad_norm": float(grad_norm),
                    "lr": scheduler.get_last_lr()[0],
                    "seconds": round(time.perf_counter() - t0, 3),
                }
                log.write(json.dumps(row) + "\n")
                log.flush()
                bar.set_postfix(loss=f"{row['loss']:.3f}", lam=f"{row['lambda']:.3g}")
            bar.update(1)
            if done % cfg.train.save_every == 0 or done == total:
                accelerator.wait_for_everyone()
                if is_main:
                    save_checkpoint(
                        out_dir,
                        done,
                        model,
                        optimizer,
                        scheduler,
                        {
                            "sampler": sampler.state_dict(),
                            "objective": objective.state_dict(),
                            "seconds": time.perf_counter() - t0,
                            "env_names": env_names,
                        },
                        keep=cfg.train.keep_checkpoints,
                    )
    bar.close()

    final_dir = out_dir / "final"
    accelerator.wait_for_everyone()
    if is_main:
        save_final(model, processor, final_dir)
    accelerator.wait_for_everyone()
    return TrainResult(out_dir=out_dir, final_dir=final_dir, steps=total, env_names=env_names)


def save_final(model: torch.nn.Module, processor: Any, final_dir: Path) -> None:
    """Save a plain transformers model (LoRA adapters merged) with its processor."""
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    model.save_pretrained(final_dir)
    processor.save_pretrained(final_dir)
