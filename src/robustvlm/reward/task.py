"""Reward-model training as a task of the one training loop (`training.loop.run_training`).

The loop owns Accelerate, AdamW, the schedule, accumulation, clipping, logs, checkpoints and
exact resume; this task supplies the pairs, the model(s) and the step of a reward loss
(`reward.losses`). Models handed to the loop:

- `standard`, `text_only`: {"reward": RewardModel};
- `shortcut_aware`, `proxy: copy`: {"main": RewardModel, "proxy": its copy at initialisation};
- `shortcut_aware`, `proxy: adapter`: {"reward": SharedBaseBranches}: one PeftModel with two LoRA
  adapters (the proxy's a copy of the main one) and two heads; one process only.

With `init_from` (a warm start) the backbone and the head are that reward model's
(`warm_start_model`); every branch above starts from them. With `reward: loglik` (or
`loglik_sum`) every branch is a `LoglikReward` (the VLM's log-likelihood of the response, its LM
head trained with the rest) instead of a `RewardModel` with a new head.

Each step logs `loss`, `acc` (share of pairs with r_chosen > r_rejected) and `reward_gap` (mean
r_chosen - r_rejected) of the main branch; shortcut-aware runs add `loss_proxy`, `acc_proxy`,
`sfc`, `sfc/<env>` (mean SFC of the batch's pairs of each environment, this process's share) and
`sfc_dist/<key>`: where the batch's SFC weights fall against the proxy's verdicts
(`analysis.reward.sfc_distribution`: share above 0.5, share of pairs the proxy ranks wrong, mean
SFC on those and on the rest, their share of the summed weight).
Shortcut-aware runs also write `sfc_pairs.jsonl` (main process, its share of each batch): one row
per trained pair and step, {"step", "id", "env", "sfc", "main", "proxy"}, the pair's SFC weight and
the main branch's and the proxy's reward gap r_chosen - r_rejected; a resumed run appends the steps
it repeats, and `analysis.sfc_steps.read_sfc_pairs` keeps the last row of each (step, id).
`pair_split.json` records the ids of the pairs trained on and held out (`write_pair_split`).
`final/` holds the main branch in the reward format (`models.reward.save_reward_model`). The
two branches' gradients are clipped each on its own (`branch_parameters`), so the main branch's
update does not depend on the proxy's gradient scale.
"""

from __future__ import annotations

import copy
import json
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn

from robustvlm.analysis.reward import sfc_distribution
from robustvlm.analysis.sfc_steps import SFC_PAIRS
from robustvlm.config import RewardConfig
from robustvlm.data.from_config import materialize, training_examples
from robustvlm.data.preference_collate import PreferenceCollator
from robustvlm.data.preferences import PreferencePair, load_pairs_from_config
from robustvlm.data.records import SkipLog
from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.models.answer import freeze_unused_lm_head
from robustvlm.models.reward import (
    LoglikReward,
    RewardModel,
    is_reward_model,
    load_reward_model,
    save_reward_model,
)
from robustvlm.models.trainable import (
    add_adapter_copy,
    configure_trainable,
    count_parameters,
    enable_gradient_checkpointing,
    find_parts,
    use_adapter,
)
from robustvlm.reward.losses import (
    branch_objective,
    loss_spec,
    pair_losses,
    shortcut_failure_coefficient,
)
from robustvlm.training.setup import base_model, make_sampler
from robustvlm.training.task import SetupContext, StepContext, TaskSetup, TrainingTask

if TYPE_CHECKING:
    from peft import PeftModel

MAIN_ADAPTER, PROXY_ADAPTER = "default", "proxy"


class SharedBaseBranches(nn.Module):
    """The adapter proxy: main and proxy RewardModels on one PeftModel (its frozen base shared),
    each computing with its own LoRA adapter and head. `forward(batch, branch)`."""

    def __init__(self, vlm: nn.Module, head_main: nn.Linear, head_proxy: nn.Linear):
        super().__init__()
        self.main = RewardModel(vlm, head_main, adapter=MAIN_ADAPTER)
        self.proxy = RewardModel(vlm, head_proxy, adapter=PROXY_ADAPTER)

    def forward(self, batch: dict[str, Any], branch: str) -> torch.Tensor:
        return getattr(self, branch)(batch)


SPLIT_FILE = "pair_split.json"


def write_pair_split(out_dir: Path, every: list[PreferencePair], trained: list[PreferencePair]) -> None:
    """Record in the run folder which pairs the model trained on and which it held out
    ({"train": ids, "test": ids}), so that `rm eval --model RUN/final` scores the held-out ones
    even where `data.split_per_env` carved them (the data file does not say so)."""
    trained_ids = [p.id for p in trained]
    held_out = [p.id for p in every if p.split == "test"]
    (out_dir / SPLIT_FILE).write_text(json.dumps({"train": trained_ids, "test": held_out}), encoding="utf-8")


def read_pair_split(model: ModelRef) -> dict[str, list[str]] | None:
    """The pair split stored by the training run of a reward model folder (RUN/final), or None."""
    path = Path(model.location).parent / SPLIT_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def warm_start_model(path: str | Path, trust_remote_code: bool = False) -> tuple[nn.Module, Any, nn.Linear]:
    """(backbone, processor, head) of the reward model in `path` (`save_reward_model`'s format),
    to train further (`init_from`), in training mode, loaded as `base_model` loads a backbone."""
    if not is_reward_model(path):
        raise ConfigError(f"init_from: {path} is not a reward model folder (a run's final/, "
                          "with reward_head.safetensors)")
    model, processor = load_reward_model(path, trust_remote_code=trust_remote_code)
    model.train()
    return model.vlm, processor, model.head


def freeze_vision_side(vlm: nn.Module) -> None:
    """Freeze all but the text decoder and LM head of a model that never sees an image (drop
    mode): the vision encoder, projectors and image-only parameters (LLaVA-OneVision's
    `image_newline`) would get no gradient, which distributed training reports as an error."""
    parts = find_parts(vlm)
    text = {id(p) for module in (parts.decoder, parts.lm_head) for p in module.parameters()}
    for parameter in vlm.parameters():
        if id(parameter) not in text:
            parameter.requires_grad_(False)


def branch_parameters(models: dict[str, nn.Module]) -> list[list[nn.Parameter]]:
    """[main branch's trainable parameters, the proxy's]: clipped each on its own, so that the
    main branch's update never depends on the scale of the proxy's gradients. The copy proxy is
    its own model; in the adapter proxy the proxy's are its LoRA adapter and its head."""
    if "proxy" in models:
        return [[p for p in models[name].parameters() if p.requires_grad] for name in ("main", "proxy")]
    groups: list[list[nn.Parameter]] = [[], []]
    for name, param in models["reward"].named_parameters():
        if param.requires_grad:
            groups[name.startswith("proxy.") or f".{PROXY_ADAPTER}." in name].append(param)
    return groups


def _on(device: torch.device, batch: dict[str, Any]) -> dict[str, Any]:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


class RewardTask(TrainingTask):
    """Train `cfg.model` as a reward model with `cfg.loss` on the training pairs of `cfg.data`."""

    command = "rm train"
    progress_keys = ("loss", "acc")

    def __init__(self, cfg: RewardConfig):
        self.cfg = cfg
        self.spec = loss_spec(cfg.loss)
        self.hp = self.spec.resolve(cfg.loss_args)
        self.label = cfg.loss
        self.env_names: list[str] = []
        self.pair_log: Path | None = None
        if self.adapter_proxy and cfg.model.trainable != "lora":
            raise ConfigError("loss_args.proxy: adapter puts the proxy on a shared frozen base, "
                              "which needs model.trainable: lora (or use proxy: copy)")
        if cfg.reward != "head" and (self.adapter_proxy or cfg.init_from is not None):
            raise ConfigError(f"reward: {cfg.reward} trains without a head: use proxy: copy and no init_from")

    @property
    def text_mode(self) -> str:
        """How the text view removes the image ("drop" where the loss has no text view)."""
        return self.hp.text_mode if "text" in self.spec.views else "drop"

    @property
    def adapter_proxy(self) -> bool:
        return self.spec.proxy and self.hp.proxy == "adapter"

    def prepare_files(self, out_dir: Path) -> None:
        if not self.cfg.data.sources:  # a built-in benchmark is written once, by one process
            materialize(self.cfg.data, out_dir)

    def setup(self, ctx: SetupContext) -> TaskSetup:
        cfg = self.cfg
        skips = SkipLog()
        every = load_pairs_from_config(cfg.data, ctx.out_dir, skips, verbose=ctx.verbose).pairs
        pairs: list[PreferencePair] = training_examples(every, cfg.data.max_train_per_env)
        if ctx.is_main:
            write_pair_split(ctx.out_dir, every, pairs)
            self.pair_log = ctx.out_dir / SFC_PAIRS if self.spec.proxy else None
        if not pairs:
            raise ConfigError("data: no training pairs (split 'train')")
        if ctx.is_main and len(skips):
            skips.write(ctx.out_dir / "skipped.jsonl")
            print(f"skipped {len(skips)} bad record(s): see {ctx.out_dir / 'skipped.jsonl'}")
        if self.adapter_proxy and ctx.accelerator.num_processes > 1:
            raise ConfigError("loss_args.proxy: adapter trains in one process; use proxy: copy "
                              "to train on several")
        self.env_names = sorted({p.env for p in pairs})
        env_ids = {name: i for i, name in enumerate(self.env_names)}
        corpus = [t for p in pairs for t in (p.query, p.chosen, p.rejected)]
        vlm: nn.Module
        if cfg.init_from is None:
            vlm, self.processor = base_model(cfg.model, ctx.out_dir, corpus, ctx.accelerator)
            head = None
        else:
            vlm, self.processor, head = warm_start_model(cfg.init_from, cfg.model.trust_remote_code)
        self.models = self._build(vlm, head)
        n_trainable, n_total = count_parameters(nn.ModuleList(self.models.values()))
        sampler = make_sampler(
            cfg.train.sampler, [env_ids[p.env] for p in pairs], global_batch=ctx.global_batch_size,
            seed=cfg.train.seed, accelerator=ctx.accelerator,
        )
        collator = PreferenceCollator(self.processor, env_ids, views=self.spec.views,
                                      text_mode=self.text_mode, max_length=cfg.data.max_length)
        return TaskSetup(
            models=self.models,
            sampler=sampler,
            collate=lambda indices: collator([pairs[i] for i in indices]),
            summary=(f"training a {cfg.loss} reward model on {cfg.init_from or cfg.model.name}: {n_trainable:,} of "
                     f"{n_total:,} parameters trainable, {len(pairs)} pairs in {len(self.env_names)} "
                     "environment(s)"),
            clip_groups=branch_parameters if self.spec.proxy else None,
        )

    def _build(self, vlm: nn.Module, head: nn.Linear | None = None) -> dict[str, nn.Module]:
        """The models of this loss (see the module doc), trainable parts set; `head`: the main
        branch's starting head (None: a new one)."""
        cfg = self.cfg
        vlm = configure_trainable(vlm, mode=cfg.model.trainable, lora=cfg.model.lora.model_dump())
        if cfg.reward == "head":
            freeze_unused_lm_head(vlm)
        drop = self.text_mode == "drop"
        if self.spec.main_view == "text" and drop:
            freeze_vision_side(vlm)
        if self.adapter_proxy:
            add_adapter_copy(cast("PeftModel", vlm), PROXY_ADAPTER, source=MAIN_ADAPTER)
        if cfg.model.gradient_checkpointing:
            enable_gradient_checkpointing(vlm)
        main = RewardModel(vlm, head) if cfg.reward == "head" else LoglikReward(vlm, normalize=cfg.reward == "loglik")
        if not self.spec.proxy:
            return {"reward": main}
        if self.adapter_proxy:
            return {"reward": SharedBaseBranches(vlm, main.head, copy.deepcopy(main.head))}
        proxy = copy.deepcopy(main)
        if drop:
            freeze_vision_side(proxy.vlm)
        return {"main": main, "proxy": proxy}

    def _rewards(self, ctx: StepContext, branch: str, batch: dict[str, Any]) -> torch.Tensor:
        """Rewards [2B] of one branch ("main" or "proxy") on its view of the batch."""
        if self.adapter_proxy:
            return ctx.models["reward"](batch, branch=branch)
        return ctx.models["reward" if not self.spec.proxy else branch](batch)

    def _branch(self, name: str) -> AbstractContextManager[None]:
        """Where a branch's backward pass runs: inside its adapter for the adapter proxy."""
        if not self.adapter_proxy:
            return nullcontext()
        vlm = cast(SharedBaseBranches, self.models["reward"]).main.vlm
        return use_adapter(vlm, MAIN_ADAPTER if name == "main" else PROXY_ADAPTER)

    def training_step(self, batch: dict[str, Any], ctx: StepContext) -> dict[str, float]:
        device = ctx.accelerator.device
        views = {view: _on(device, batch[view]) for view in self.spec.views}
        r_main = self._rewards(ctx, "main", views[self.spec.main_view])
        c_main, j_main, l_main = pair_losses(r_main, batch["margin"], self.hp)
        row = {"acc": float((c_main > j_main).float().mean()),
               "reward_gap": float((c_main - j_main).detach().mean())}
        if not self.spec.proxy:
            loss = branch_objective(c_main, j_main, l_main, self.hp)
            ctx.backward(loss)
            return {"loss": float(loss.detach()), **row}
        r_text = self._rewards(ctx, "proxy", views["text"])
        c_text, j_text, l_text = pair_losses(r_text, batch["margin"], self.hp)
        sfc = shortcut_failure_coefficient(l_main, l_text)
        loss = branch_objective(c_main, j_main, l_main, self.hp, weights=sfc)
        loss_proxy = branch_objective(c_text, j_text, l_text, self.hp)
        with self._branch("main"):
            ctx.backward(loss)
        with self._branch("proxy"):
            ctx.backward(loss_proxy)
        proxy_right = c_text > j_text
        row.update({"loss_proxy": float(loss_proxy.detach()),
                    "acc_proxy": float(proxy_right.float().mean()),
                    "sfc": float(sfc.mean())})
        spread = sfc_distribution(sfc.float().cpu().numpy(), proxy_right.cpu().numpy())
        row.update({f"sfc_dist/{k}": v for k, v in spread.items() if k != "mean" and v is not None})
        env = batch["env"]
        for i, name in enumerate(self.env_names):
            if (env == i).any():
                row[f"sfc/{name}"] = float(sfc[env.to(sfc.device) == i].mean())
        self._log_pairs(ctx.step + 1, batch, sfc, (c_main - j_main).detach(), (c_text - j_text).detach())
        return {"loss": float(loss.detach()), **row}

    def _log_pairs(self, step: int, batch: dict[str, Any], sfc: torch.Tensor, main: torch.Tensor,
                   proxy: torch.Tensor) -> None:
        """Append one `sfc_pairs.jsonl` row per pair of the batch (see the module doc); [B] each."""
        if self.pair_log is None:
            return
        names = [self.env_names[int(i)] if 0 <= int(i) < len(self.env_names) else "" for i in batch["env"]]
        rows = [{"step": step, "id": pid, "env": env, "sfc": float(w), "main": float(m), "proxy": float(p)}
                for pid, env, w, m, p in zip(batch["ids"], names, sfc.tolist(), main.tolist(), proxy.tolist())]
        with self.pair_log.open("a", encoding="utf-8") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rows))

    def state_dict(self) -> dict[str, Any]:
        return {"env_names": self.env_names}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["env_names"] != self.env_names:
            raise ConfigError(
                f"the checkpoint was trained on environments {state['env_names']}, but the data now "
                f"gives {self.env_names}: resume with the data the run started with"
            )

    def save_final(self, final_dir: Path, state_dicts: dict[str, dict[str, torch.Tensor]]) -> None:
        meta = {"loss": self.cfg.loss, "loss_args": self.hp.to_config(), "trained_on": self.env_names}
        if self.adapter_proxy:
            save_reward_model(cast(SharedBaseBranches, self.models["reward"]).main, self.processor, final_dir, meta=meta)
            return
        name = "main" if self.spec.proxy else "reward"
        save_reward_model(cast(RewardModel, self.models[name]), self.processor, final_dir, state=state_dicts[name], meta=meta)
