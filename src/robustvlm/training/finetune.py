"""Generative fine-tuning with one of the invariance objectives, as a task of the training loop.

The VLM's answer tokens are a sequence of token classifications: `AnswerModel` yields the LM-head
logits at the answer positions only, and the configured objective (ERM, IRMv1, V-REx, GroupDRO,
BIRM, Dynamic BIRM) turns them into the loss and the log row (R_emp, R_inv, lambda, P,
risk/<env>). Besides the loop's outputs, the run folder holds:
  data/           a built-in benchmark, synthesised once (with `data.benchmark`)
  base/           the initial tiny model + processor (`tiny:` models only: built once, reused
                  on resume)
  skipped.jsonl   records skipped under data.on_bad_record: skip
  final/          the fine-tuned model + processor (save_pretrained format, LoRA merged)

`export_checkpoint` writes an intermediate checkpoint in the same format as final/, so a sweep
can evaluate several checkpoints of one run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from robustvlm.config import RunConfig
from robustvlm.data.collate import VLMCollator
from robustvlm.data.from_config import materialize
from robustvlm.data.records import Example
from robustvlm.errors import ConfigError
from robustvlm.model_ref import TINY, ModelRef
from robustvlm.models.answer import AnswerModel
from robustvlm.models.loading import load_vlm
from robustvlm.models.trainable import (
    configure_trainable,
    count_parameters,
    enable_gradient_checkpointing,
    save_merged,
)
from robustvlm.runs import atomic_folder
from robustvlm.training.checkpoint import WEIGHTS_FILE
from robustvlm.training.setup import (
    base_model,
    build_run_objective,
    load_training_data,
    make_sampler,
)
from robustvlm.training.task import SetupContext, StepContext, TaskSetup, TrainingTask, indexed

ANSWER_MODEL = "answer"


class FineTuneTask(TrainingTask):
    """Fine-tune `cfg.model` with `cfg.method` on the in-domain training records of `cfg.data`."""

    progress_keys = ("loss", "lambda")

    def __init__(self, cfg: RunConfig):
        self.cfg = cfg
        self.label = cfg.method
        self.env_names: list[str] = []
        self.examples: list[Example] = []  # every record of the data, set by `setup`

    def prepare_files(self, out_dir: Path) -> None:
        materialize(self.cfg.data, out_dir)  # a built-in benchmark is written once, by one process

    def setup(self, ctx: SetupContext) -> TaskSetup:
        cfg = self.cfg
        self.examples, train_set = load_training_data(cfg.data, ctx)
        self.env_names = sorted({ex.env for ex in train_set})
        env_ids = {name: i for i, name in enumerate(self.env_names)}
        self.objective = build_run_objective(cfg, self.env_names)

        corpus = [t for ex in train_set for t in (ex.instruction, ex.target)]
        model, self.processor = base_model(cfg.model, ctx.out_dir, corpus, ctx.accelerator)
        self.model = configure_trainable(model, mode=cfg.model.trainable, lora=cfg.model.lora.model_dump())
        if cfg.model.gradient_checkpointing:
            enable_gradient_checkpointing(self.model)
        n_trainable, n_total = count_parameters(self.model)
        sampler = make_sampler(
            cfg.train.sampler,
            [env_ids[ex.env] for ex in train_set],
            global_batch=ctx.global_batch_size,
            seed=cfg.train.seed,
            accelerator=ctx.accelerator,
        )
        collator = VLMCollator(self.processor, env_ids, train=True)
        return TaskSetup(
            models={ANSWER_MODEL: AnswerModel(self.model)},
            sampler=sampler,
            collate=indexed(collator, train_set),
            summary=(
                f"training {cfg.model.name} with {cfg.method}: {n_trainable:,} of {n_total:,} "
                f"parameters trainable, {len(train_set)} examples in {len(self.env_names)} environments"
            ),
        )

    def training_step(self, batch: dict[str, Any], ctx: StepContext) -> dict[str, float]:
        parts = self.objective(ctx.models[ANSWER_MODEL](batch), ctx.step)
        ctx.backward(parts.loss)
        return parts.log_row()

    def resets_optimizer_at(self, step: int) -> bool:
        return self.objective.resets_optimizer_at(step)

    def state_dict(self) -> dict[str, Any]:
        return {"objective": self.objective.state_dict(), "env_names": self.env_names}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["env_names"] != self.env_names:
            raise ConfigError(
                f"the checkpoint was trained on environments {state['env_names']}, but the data now "
                f"gives {self.env_names}: resume with the data the run started with"
            )
        self.objective.load_state_dict(state["objective"])

    def save_final(self, final_dir: Path, state_dicts: dict[str, dict[str, torch.Tensor]]) -> None:
        prefix = "vlm."  # AnswerModel keeps the VLM as its `vlm` attribute
        weights = {k[len(prefix):]: v for k, v in state_dicts[ANSWER_MODEL].items()}
        save_merged(self.model, self.processor, final_dir, state_dict=weights)



def export_checkpoint(cfg: RunConfig, run_dir: Path, checkpoint: Path, out_dir: Path) -> Path:
    """Write the model of training checkpoint `checkpoint` of the run in `run_dir` to `out_dir` in
    final/'s format (model + processor, LoRA merged); returns `out_dir`.

    The checkpoint holds the trainable weights (`training.checkpoint`); the frozen ones come from
    the base model, as when the run was trained. Sharded checkpoints (DeepSpeed, FSDP) are not
    exported. The folder is written under a temporary name and renamed when complete.
    """
    from safetensors.torch import load_file

    weights = Path(checkpoint) / WEIGHTS_FILE
    if not weights.is_file():
        raise ConfigError(
            f"{checkpoint}: no {WEIGHTS_FILE}; sharded (DeepSpeed / FSDP) checkpoints cannot be "
            "exported for evaluation, only the final model"
        )
    tiny = cfg.model.ref.kind == TINY
    ref = ModelRef.folder(Path(run_dir) / "base") if tiny else cfg.model.ref
    model: torch.nn.Module
    model, processor = load_vlm(ref, trust_remote_code=cfg.model.trust_remote_code)
    model = configure_trainable(model, mode=cfg.model.trainable, lora=cfg.model.lora.model_dump())
    result = AnswerModel(model).load_state_dict(load_file(str(weights)), strict=False)
    if result.unexpected_keys:
        raise ConfigError(
            f"{weights}: weights the model lacks: {sorted(result.unexpected_keys)[:5]}"
        )
    out_dir = Path(out_dir)
    with atomic_folder(out_dir) as tmp:
        save_merged(model, processor, tmp)
    return out_dir
