"""The reward ladder's first rung: linear Bradley-Terry rewards on two synthetic features, trained
through the same loss functions as the VLM reward models (`reward.losses`).

Each pair has two feature differences (chosen minus rejected): an *image* feature that favours
the chosen response in every environment, but noisily (N(`image_mean`, 1)), and a *text*
feature, a cue of size `text_size` that agrees with the preference with probability
`text_agreement` of its environment (0.95 in training: a near-perfect shortcut; 0.5 at test: no
information). A reward is linear, r = w . phi: the multimodal model sees both features, the
text-only proxy the text feature alone. Standard, text-only and shortcut-aware losses (SFC from
the proxy's detached per-pair losses) train full-batch with Adam on the training environment.

Read out per loss: the share of the weight on the image feature, |w_img| / (|w_img| + |w_txt|);
accuracy in training and at test (the o.o.d. environment); SFD at test (accuracy where the proxy
is right minus where it is wrong); the proxy's accuracy; and the distribution of the SFC weights
over the training pairs (`analysis.reward.sfc_distribution`).

`train_linear_rewards` takes any two views of the pairs as feature differences, so the ladder's
second rung (`experiments.reward.frozen_rung`: a head on a frozen VLM's hidden states) trains through it too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from robustvlm.analysis.reward import sfc_distribution
from robustvlm.reward.ladder_results import LinearLoss, LinearProxy, LinearRung
from robustvlm.reward.losses import (
    LOSSES,
    branch_objective,
    pair_losses,
    shortcut_failure_coefficient,
)


@dataclass(frozen=True)
class LinearPrefs:
    """Pairs as feature differences: features [n, 2] (image, text), float64."""

    features: np.ndarray

    @classmethod
    def draw(cls, n: int, *, text_agreement: float, image_mean: float = 0.5, text_size: float = 2.0,
             seed: int = 0) -> LinearPrefs:
        """n pairs of one environment (module doc)."""
        rng = np.random.default_rng(seed)
        image = rng.normal(image_mean, 1.0, n)
        text = text_size * np.where(rng.random(n) < text_agreement, 1.0, -1.0)
        return cls(np.stack([image, text], axis=1))

    def accuracy(self, weights: np.ndarray) -> np.ndarray:
        """[n] whether w . phi > 0 (the chosen response wins)."""
        return self.features @ weights > 0


def _rewards(weights: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
    """[2n] rewards, chosen rows (w . phi) first, rejected rows (0) after: the layout
    `pair_losses` reads."""
    return torch.cat([features @ weights, torch.zeros(len(features), dtype=features.dtype)])


def train_linear_rewards(multimodal: np.ndarray, text: np.ndarray, *, steps: int = 500, lr: float = 0.05,
                         batch_size: int | None = None, seed: int | None = None) -> dict[str, np.ndarray]:
    """Linear rewards r = w . phi trained with each loss of `reward.losses` by Adam.

    Args:
        multimodal: [n, d] per-pair feature differences (chosen minus rejected) the multimodal
            model sees; text: [n, d] those the text-only model sees (same pairs).
        batch_size: pairs per step, drawn without replacement each step (None: full batch).
        seed: None: weights start at zero; else at N(0, (1 / (d + 1))^2) (the VLM head's
            initialisation), the same for every loss and for the proxy, and the batches follow it.

    Returns {"standard", "text_only", "shortcut_aware", "proxy"}: weights [d] of each loss ("text_only"
    trained on `text`; "proxy" the text-only branch trained beside the shortcut-aware one); "sfc":
    [n] the SFC weight of every training pair under the final main branch and proxy.
    """
    x, xt = torch.as_tensor(multimodal, dtype=torch.float64), torch.as_tensor(text, dtype=torch.float64)
    n, d = x.shape
    rng = np.random.default_rng(seed)
    start = torch.zeros(d, dtype=x.dtype) if seed is None else torch.as_tensor(rng.normal(0.0, 1.0 / (d + 1), d))
    batches = [None if batch_size is None else torch.as_tensor(rng.choice(n, min(batch_size, n), replace=False))
               for _ in range(steps)]
    out: dict[str, np.ndarray] = {}
    for loss in ("standard", "text_only", "shortcut_aware"):
        hp = LOSSES[loss].resolve({})
        main = start.clone().requires_grad_(True)
        proxy = start.clone().requires_grad_(True)
        optimizer = torch.optim.Adam([main, proxy], lr=lr)
        for rows in batches:
            view, view_text = (x, xt) if rows is None else (x[rows], xt[rows])
            margin = torch.zeros(len(view), dtype=x.dtype)
            c, r, per_pair = pair_losses(_rewards(main, view_text if loss == "text_only" else view), margin, hp)
            objective = branch_objective(c, r, per_pair, hp)
            if loss == "shortcut_aware":
                ct, rt, per_pair_text = pair_losses(_rewards(proxy, view_text), margin, hp)
                sfc = shortcut_failure_coefficient(per_pair, per_pair_text)
                objective = branch_objective(c, r, per_pair, hp, weights=sfc) + branch_objective(ct, rt, per_pair_text, hp)
            optimizer.zero_grad(set_to_none=True)
            objective.backward()
            optimizer.step()
        out[loss] = main.detach().numpy().copy()
        if loss == "shortcut_aware":
            out["proxy"] = proxy.detach().numpy().copy()
    with torch.no_grad():
        zero = torch.zeros(n, dtype=x.dtype)
        hp = LOSSES["shortcut_aware"].resolve({})
        main_losses = pair_losses(_rewards(torch.as_tensor(out["shortcut_aware"]), x), zero, hp)[2]
        text_losses = pair_losses(_rewards(torch.as_tensor(out["proxy"]), xt), zero, hp)[2]
        out["sfc"] = shortcut_failure_coefficient(main_losses, text_losses).numpy()
    return out


def image_share(weights: np.ndarray) -> float:
    """|w_img| / (|w_img| + |w_txt|) (0.5 for zero weights)."""
    total = float(np.abs(weights).sum())
    return float(abs(weights[0]) / total) if total else 0.5


def sfd(correct: np.ndarray, proxy_correct: np.ndarray) -> float | None:
    """Accuracy where the proxy is right minus where it is wrong (None when either set is empty)."""
    if proxy_correct.all() or not proxy_correct.any():
        return None
    return float(correct[proxy_correct].mean() - correct[~proxy_correct].mean())


def linear_rung(seeds: tuple[int, ...] = (0, 1, 2), *, n: int = 2000, steps: int = 500,
                train_agreement: float = 0.95, test_agreement: float = 0.5) -> LinearRung:
    """Per loss, per seed: image share, training and test (o.o.d.) accuracy, SFD at test; and
    the proxy's training and test accuracy and the SFC weights' distribution over the training
    pairs (`analysis.reward.sfc_distribution`, one per seed)."""
    losses = {loss: LinearLoss([], [], [], []) for loss in ("standard", "text_only", "shortcut_aware")}
    proxy = LinearProxy([], [], [])
    text_only = np.array([0.0, 1.0])
    for seed in seeds:
        train = LinearPrefs.draw(n, text_agreement=train_agreement, seed=2 * seed)
        test = LinearPrefs.draw(n, text_agreement=test_agreement, seed=2 * seed + 1)
        fits = train_linear_rewards(train.features, train.features * text_only, steps=steps)
        proxy_correct = test.accuracy(fits["proxy"])
        for loss, row in losses.items():
            view = fits[loss] * (text_only if loss == "text_only" else 1.0)
            row.image_share.append(image_share(view))
            row.train_accuracy.append(float(train.accuracy(view).mean()))
            row.ood_accuracy.append(float(test.accuracy(view).mean()))
            row.sfd.append(sfd(test.accuracy(view), proxy_correct))
        proxy_train = train.accuracy(fits["proxy"] * text_only)
        proxy.train_accuracy.append(float(proxy_train.mean()))
        proxy.ood_accuracy.append(float(proxy_correct.mean()))
        proxy.sfc.append(sfc_distribution(fits["sfc"], proxy_train))
    return LinearRung(losses, proxy)
