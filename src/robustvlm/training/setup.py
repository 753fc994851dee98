"""What every task of the training loop sets up the same way: the configured objective, the batch
sampler (`train.sampler`), the base model (a tiny model built once into the run folder) and the
in-domain training records. Generative fine-tuning (`training.finetune`), reward models
(`reward.task`) and embedding models (`embeddings.task`) share them."""

from __future__ import annotations

from pathlib import Path

from accelerate import Accelerator
from transformers import PreTrainedModel, ProcessorMixin

from robustvlm.config import DataConfig, ModelConfig, RunConfig
from robustvlm.data.from_config import load_from_config, training_examples
from robustvlm.data.records import Example, SkipLog
from robustvlm.errors import ConfigError
from robustvlm.model_ref import TINY, ModelRef
from robustvlm.models.loading import load_vlm, save_tiny_base
from robustvlm.objectives import Objective, build_objective
from robustvlm.training.sampler import (
    EnvBalancedBatchSampler,
    ResumableBatchSampler,
    ShuffleBatchSampler,
)
from robustvlm.training.task import SetupContext


def build_run_objective(cfg: RunConfig, env_names: list[str]) -> Objective:
    """The configured objective; a bad method or hyperparameter becomes a ConfigError."""
    try:
        return build_objective(cfg.method, env_names, cfg.method_args)
    except ValueError as err:
        raise ConfigError(f"method/method_args: {err}") from None


def make_sampler(
    sampler: str, envs: list[int], *, global_batch: int, seed: int, accelerator: Accelerator
) -> ResumableBatchSampler:
    """`train.sampler` over examples with environment ids `envs`.

    "balanced": every global batch holds the same number of examples from several environments
    (at least two, at most half the batch); "shuffle": plain shuffled batches.
    """
    kw = dict(seed=seed, rank=accelerator.process_index, world_size=accelerator.num_processes)
    if sampler == "shuffle":
        return ShuffleBatchSampler(len(envs), batch_size=global_batch, **kw)
    n_envs = len(set(envs))
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
        envs, per_env=global_batch // envs_per_batch, envs_per_batch=envs_per_batch, **kw
    )


def base_model(cfg: ModelConfig, out_dir: Path, corpus: list[str], accelerator: Accelerator
               ) -> tuple[PreTrainedModel, ProcessorMixin]:
    """Load the model `cfg` names; a tiny model is built once into `out_dir/base` and reused.

    The base folder is written under a temporary name and renamed, so a killed run never leaves a
    half-written one; every process waits for it before loading.
    """
    ref = cfg.ref
    if ref.kind == TINY:
        base = out_dir / "base"
        if accelerator.is_main_process:
            save_tiny_base(ref, base, tiny_options=cfg.tiny, corpus=corpus)
        accelerator.wait_for_everyone()
        ref = ModelRef.folder(base)
    return load_vlm(ref, trust_remote_code=cfg.trust_remote_code)


def load_training_set(cfg: DataConfig, ctx: SetupContext) -> list[Example]:
    """The in-domain training records of `cfg` (capped per environment by
    `max_train_per_env`); skipped bad records are listed in the run's skipped.jsonl."""
    return load_training_data(cfg, ctx)[1]


def load_training_data(cfg: DataConfig, ctx: SetupContext) -> tuple[list[Example], list[Example]]:
    """(every record of `cfg`, all splits, as `load_from_config` gives them; `load_training_set`'s
    training records of them), for a task whose evaluation reads the records training loaded."""
    skips = SkipLog()
    examples = load_from_config(cfg, ctx.out_dir, skips, verbose=ctx.verbose)
    train_set = training_examples(examples, cfg.max_train_per_env)
    if not train_set:
        raise ConfigError("data: no in-domain training records (split 'train', ood false)")
    if ctx.is_main and len(skips):
        skips.write(ctx.out_dir / "skipped.jsonl")
        print(f"skipped {len(skips)} bad record(s): see {ctx.out_dir / 'skipped.jsonl'}")
    return examples, train_set
