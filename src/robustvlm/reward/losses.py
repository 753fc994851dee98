"""The reward losses: Bradley-Terry, its text-only variant, and shortcut-aware reweighting.

Per pair i with rewards r_c (chosen) and r_r (rejected):

    L_i = -log sigmoid(r_c - r_r - m_i)                        (Bradley-Terry; m_i the pair's
                                                               margin, 0 without one)
    C   = c * mean_i (r_c + r_r)^2                             (reward centering, TRL's
                                                               `center_rewards_coefficient` c)

- `standard`: mean_i L_i + C on the multimodal pair (the shortcut-aware paper's eq. 1).
- `text_only`: the same with the image removed (eq. 3): `text_mode` drop | blank.
- `shortcut_aware` (eq. 5-7): a main multimodal branch and a text-only proxy from the same
  initialisation. With the per-pair losses L_i (main) and L_t,i (proxy),

      SFC_i = L_t,i / (L_i + L_t,i)          computed from detached losses (a weight only)
      main loss  = mean_i SFC_i * L_i + C
      proxy loss = mean_i L_t,i + C_t        (the proxy's own plain loss, trained alongside)

  Pairs the text-only proxy gets wrong (high L_t) weigh more in the main loss. The proxy is a
  second model copy (`proxy: copy`) or a second LoRA adapter on the shared frozen base
  (`proxy: adapter`, with `model.trainable: lora`). Only the main branch is saved.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import torch
import torch.nn.functional as F

from robustvlm.errors import ConfigError
from robustvlm.objectives.base import HParam, UntypedHyperparameters, hyperparameter_class


def bradley_terry(
    r_chosen: torch.Tensor, r_rejected: torch.Tensor, margin: torch.Tensor | None = None
) -> torch.Tensor:
    """Per-pair losses [B] = -log sigmoid(r_chosen - r_rejected - margin) (nats)."""
    diff = r_chosen - r_rejected
    if margin is not None:
        diff = diff - margin
    return -F.logsigmoid(diff)


def centering_penalty(r_chosen: torch.Tensor, r_rejected: torch.Tensor) -> torch.Tensor:
    """mean((r_chosen + r_rejected)^2): pulls rewards towards zero mean (TRL's centering)."""
    return ((r_chosen + r_rejected) ** 2).mean()


def shortcut_failure_coefficient(loss_main: torch.Tensor, loss_text: torch.Tensor) -> torch.Tensor:
    """Per-pair SFC [B] = L_text / (L_main + L_text), detached; both losses are positive (a
    Bradley-Terry loss is never 0 in floating point), so the ratio lies in (0, 1)."""
    main, text = loss_main.detach(), loss_text.detach()
    return text / (main + text)


@dataclass(frozen=True)
class LossSpec:
    """A reward loss: its hyperparameters, and which views of a pair it trains on.

    Attributes:
        main_view: "multimodal" or "text": what the saved model sees in training.
        proxy: True when a text-only proxy trains beside the main branch.
    """

    name: str
    help: str
    main_view: str
    proxy: bool
    hparams: dict[str, HParam]

    @cached_property
    def hparams_class(self) -> type[UntypedHyperparameters]:
        """The typed hyperparameters of this loss (`objectives.base.hyperparameter_class`, as
        objectives get theirs)."""
        return hyperparameter_class(f"{self.name}_hyperparameters", self.hparams)

    def resolve(self, args: dict[str, Any]) -> Any:
        """The typed hyperparameters with `args` applied; ConfigError naming a bad key or value."""
        try:
            hp = self.hparams_class.from_config(args, f"loss '{self.name}'")
        except ConfigError as err:
            raise ConfigError(f"loss_args: {err}") from None
        coefficient = hp.center_rewards_coefficient
        if coefficient is not None and (isinstance(coefficient, bool) or not isinstance(coefficient, int | float)):
            raise ConfigError(f"loss_args.center_rewards_coefficient: a number or null, not {coefficient!r}")
        return hp

    @property
    def views(self) -> tuple[str, ...]:
        """The views of each pair a training batch needs."""
        return ("multimodal", "text") if self.proxy else (self.main_view,)


_COMMON = {
    "center_rewards_coefficient": HParam(None, ("log", 1e-3, 1e-1),
                                         "weight c of the centering term mean((r_c + r_r)^2); null: off"),
    "use_margin": HParam(True, None, "subtract each pair's margin (pairs without one: 0)"),
}
_TEXT_MODE = {"text_mode": HParam("drop", ("choice", "drop", "blank"),
                                  "how the image is removed: drop (no image tokens) or blank (a white image)")}

LOSSES: dict[str, LossSpec] = {
    spec.name: spec
    for spec in (
        LossSpec("standard", "Bradley-Terry on the multimodal pair", "multimodal", False, dict(_COMMON)),
        LossSpec("text_only", "Bradley-Terry with the image removed (the shortcut proxy on its own)",
                 "text", False, {**_COMMON, **_TEXT_MODE}),
        LossSpec("shortcut_aware", "SFC-weighted Bradley-Terry with a text-only proxy trained alongside",
                 "multimodal", True, {**_COMMON, **_TEXT_MODE,
                                      "proxy": HParam("copy", ("choice", "copy", "adapter"),
                                                      "the proxy: a second model copy or a second LoRA adapter")}),
    )
}


def loss_spec(name: str) -> LossSpec:
    """The registered loss `name`; ConfigError naming the known ones otherwise."""
    if name not in LOSSES:
        raise ConfigError(f"loss: unknown reward loss {name!r}; choose one of {sorted(LOSSES)}")
    return LOSSES[name]


def pair_losses(
    rewards: torch.Tensor, margin: torch.Tensor, hp: Any
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(r_chosen [B], r_rejected [B], Bradley-Terry losses [B]) of one branch's rewards [2B]
    (chosen rows first), with the pairs' margins [B] when `use_margin` (`hp`: `LossSpec.resolve`)."""
    r_chosen, r_rejected = rewards.chunk(2)
    return r_chosen, r_rejected, bradley_terry(r_chosen, r_rejected, margin if hp.use_margin else None)


def branch_objective(
    r_chosen: torch.Tensor, r_rejected: torch.Tensor, per_pair: torch.Tensor, hp: Any,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """The scalar a branch minimises: mean_i w_i L_i (w = 1 without `weights`) plus the
    centering term when `center_rewards_coefficient` is set."""
    loss = (per_pair if weights is None else weights * per_pair).mean()
    if hp.center_rewards_coefficient:
        loss = loss + hp.center_rewards_coefficient * centering_penalty(r_chosen, r_rejected)
    return loss
