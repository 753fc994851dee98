"""The reward ladder's second rung: a reward head on a frozen VLM backbone.

The backbone (e.g. the reward demo's fine-tuned policy, the initial weights of every full reward
model) stays fixed, so the hidden state h_T the head reads (`models.reward.candidate_states`) is a
fixed feature of each response: computed once per pair and view, chosen and rejected, with the
image (`multimodal`) and without it (`drop`). The reward r = w . h_T is then a linear reward on
those features and trains through `experiments.reward.linear_rung.train_linear_rewards` with the losses of
`reward.losses`: standard (multimodal), text-only (drop) and shortcut-aware (a multimodal main
head, a text-only proxy head, SFC from their detached per-pair losses), in batches of pairs from
the VLM head's initialisation, one seed per initialisation and batch order.

As in `rm matrix`, each loss trains on one environment and is scored on the test pairs of every
environment; `analysis.reward_matrix.aggregate_matrix` turns the scores into the same i.i.d. /
o.o.d. averages and SFD per o.o.d. cell (the text-only head of the same seed and environment
splitting the pairs) as the full models get.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from robustvlm.analysis.reward import sfc_distribution
from robustvlm.analysis.reward_matrix import MatrixRun, aggregate_matrix
from robustvlm.data.preferences import PreferencePair
from robustvlm.experiments.reward.linear_rung import train_linear_rewards
from robustvlm.model_ref import ModelRef
from robustvlm.models.loading import load_vlm
from robustvlm.models.reward import RewardModel, candidate_states, hidden_size, new_head
from robustvlm.reward.ladder_results import MatrixRung, ProxyWeights
from robustvlm.reward.scoring import view_image

#: the loss labels of the rung and the view each is scored in
LABELS = {"standard": "multimodal", "text_only": "drop", "shortcut_aware": "multimodal"}


def pair_states(model: RewardModel, processor: Any, pairs: Sequence[PreferencePair], view: str) -> np.ndarray:
    """[n, 2, d] float64: the hidden states the head reads for each pair's chosen and rejected
    response, in `view` ("multimodal" or "drop")."""
    rows = []
    for pair in pairs:
        image = view_image(pair.image, view, source=pair.source, record=pair.id)
        states = candidate_states(model, processor, pair.query, [pair.chosen, pair.rejected],
                                  image=image, record=pair.id)
        rows.append(states.double().cpu().numpy())
    return np.stack(rows)


def frozen_states(backbone: ModelRef, pairs: Sequence[PreferencePair]) -> dict[str, np.ndarray]:
    """{view: [n, 2, d]} states of `pairs` under the frozen `backbone` (a model folder), with and
    without the image."""
    vlm, processor = load_vlm(backbone)
    head = new_head(hidden_size(vlm), generator=torch.Generator().manual_seed(0))  # unused: states only
    model = RewardModel(vlm.eval(), head)
    return {view: pair_states(model, processor, pairs, view) for view in ("multimodal", "drop")}


def frozen_rung(
    pairs: Sequence[PreferencePair],
    states: dict[str, np.ndarray],
    seeds: Sequence[int],
    *,
    steps: int,
    batch_size: int = 8,
    lr: float = 0.01,
) -> MatrixRung:
    """Train the three heads per seed and training environment on the frozen `states` of `pairs`
    (`frozen_states`, same order) and score every test pair.

    Returns the matrix and, per seed, the proxy head's accuracy on its training pairs (mean over
    environments) and the SFC weights' distribution over the training pairs of every environment.
    """
    pairs = list(pairs)
    diffs = {view: s[:, 0] - s[:, 1] for view, s in states.items()}
    test = [i for i, p in enumerate(pairs) if p.split == "test"]
    envs = sorted({p.env for p in pairs if p.split == "train"})
    runs: list[MatrixRun] = []
    proxy = ProxyWeights([], [])
    for seed in seeds:
        accuracies, weights, verdicts = [], [], []
        for env in envs:
            train = [i for i, p in enumerate(pairs) if p.split == "train" and p.env == env]
            fits = train_linear_rewards(diffs["multimodal"][train], diffs["drop"][train], steps=steps,
                                        batch_size=batch_size, lr=lr, seed=seed)
            right = diffs["drop"][train] @ fits["proxy"] > 0
            accuracies.append(float(right.mean()))
            weights.append(fits["sfc"])
            verdicts.append(right)
            for label, view in LABELS.items():
                rewards = states[view][test] @ fits[label]  # [n_test, 2]
                rows = [{"id": pairs[i].id, "env": pairs[i].env, view: r.tolist()} for i, r in zip(test, rewards)]
                runs.append(MatrixRun(label, seed, env, rows, view))
        proxy.train_accuracy.append(float(np.mean(accuracies)))
        proxy.sfc.append(sfc_distribution(np.concatenate(weights), np.concatenate(verdicts)))
    texts = {pairs[i].id: (pairs[i].env, pairs[i].chosen, pairs[i].rejected) for i in test}
    results = aggregate_matrix(runs, texts, proxy_label="text_only")
    return MatrixRung(results, proxy)
