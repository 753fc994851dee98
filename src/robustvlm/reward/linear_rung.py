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
in training (mean, share above 0.5).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

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


def train_linear_rewards(prefs: LinearPrefs, *, steps: int = 500, lr: float = 0.05) -> dict[str, np.ndarray]:
    """{"standard", "text_only", "shortcut_aware", "proxy"}: weights [2] of each loss after
    `steps` full-batch Adam steps from zero; "proxy" is the text-only branch trained beside the
    shortcut-aware one; "sfc": [n] the SFC weights of its last step."""
    x = torch.as_tensor(prefs.features)
    text_mask = torch.tensor([0.0, 1.0], dtype=x.dtype)
    margin = torch.zeros(len(x), dtype=x.dtype)
    out: dict[str, np.ndarray] = {}
    for loss in ("standard", "text_only", "shortcut_aware"):
        hp = LOSSES[loss].resolve({})
        main = torch.zeros(2, dtype=x.dtype, requires_grad=True)
        proxy = torch.zeros(2, dtype=x.dtype, requires_grad=True)
        optimizer = torch.optim.Adam([main, proxy], lr=lr)
        sfc = None
        for _ in range(steps):
            main_view = x * text_mask if loss == "text_only" else x
            c, r, per_pair = pair_losses(_rewards(main, main_view), margin, hp)
            objective = branch_objective(c, r, per_pair, hp)
            if loss == "shortcut_aware":
                ct, rt, per_pair_text = pair_losses(_rewards(proxy, x * text_mask), margin, hp)
                sfc = shortcut_failure_coefficient(per_pair, per_pair_text)
                objective = branch_objective(c, r, per_pair, hp, weights=sfc) + branch_objective(ct, rt, per_pair_text, hp)
            optimizer.zero_grad(set_to_none=True)
            objective.backward()
            optimizer.step()
        out[loss] = main.detach().numpy().copy()
        if loss == "shortcut_aware":
            out["proxy"], out["sfc"] = proxy.detach().numpy().copy(), sfc.numpy().copy()
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
                train_agreement: float = 0.95, test_agreement: float = 0.5) -> dict[str, dict[str, list[float]]]:
    """Per loss, per seed: image share, training and test (o.o.d.) accuracy, SFD at test; and
    the proxy's test accuracy and the SFC weights' mean and share above 0.5 in training."""
    rows: dict[str, dict[str, list[float]]] = {}
    for seed in seeds:
        train = LinearPrefs.draw(n, text_agreement=train_agreement, seed=2 * seed)
        test = LinearPrefs.draw(n, text_agreement=test_agreement, seed=2 * seed + 1)
        fits = train_linear_rewards(train, steps=steps)
        proxy_correct = test.accuracy(fits["proxy"])
        for loss in ("standard", "text_only", "shortcut_aware"):
            row = rows.setdefault(loss, {})
            view = fits[loss] * (np.array([0.0, 1.0]) if loss == "text_only" else 1.0)
            row.setdefault("image_share", []).append(image_share(view))
            row.setdefault("train_accuracy", []).append(float(train.accuracy(view).mean()))
            row.setdefault("ood_accuracy", []).append(float(test.accuracy(view).mean()))
            row.setdefault("sfd", []).append(sfd(test.accuracy(view), proxy_correct))
        extra = rows.setdefault("proxy", {})
        extra.setdefault("ood_accuracy", []).append(float(proxy_correct.mean()))
        extra.setdefault("sfc_mean", []).append(float(fits["sfc"].mean()))
        extra.setdefault("sfc_above_half", []).append(float((fits["sfc"] > 0.5).mean()))
    return rows
