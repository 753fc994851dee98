"""Defined-label in-context classification: does a VLM read a label mapping from its context?

A trial shows one (or `shots`) demonstration picture(s) of each of `n_ways` distinct classes,
each class labelled with its own word of `LABEL_WORDS` (a fresh random mapping per trial), then a
query picture of one of those classes (never a demonstration's own picture). Only the
demonstrations tell which word answers it: chance is 1 / `n_ways`, and a 0-shot trial (the same
question, no demonstrations) measures that chance. The prompt is the model zoo's defined-label
tuning form (`workflows.zoo.data.demonstration_messages`, `defined_label_question`); the answer
is the word with the largest summed log-likelihood (`models.loglik.option_logliks`), so every
reply is one of the allowed words.

Trials are drawn over abstract item indices per class (`draw_trials`), so the same trial can be
shown with its demonstrations in another domain of a suite whose item i of a class is the same
scan in every domain (`robustvlm data synth --benchmark fashion-test`): the cost of shifted
demonstrations is then paired trial by trial.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image

from robustvlm.errors import ConfigError
from robustvlm.models.loglik import option_logliks
from robustvlm.workflows.zoo.data import LABEL_WORDS, defined_label_question, demonstration_messages


@dataclass(frozen=True)
class Trial:
    """One defined-label trial over items addressed as (class index, item index).

    Attributes:
        demos: (class, item) of each demonstration, in prompt order.
        words: the word each demonstration is labelled with (its class's word).
        query: (class, item) of the query.
        answer: the query class's word.
    """

    demos: tuple[tuple[int, int], ...]
    words: tuple[str, ...]
    query: tuple[int, int]
    answer: str


def draw_trials(items_per_class: Sequence[int], n_trials: int, *, n_ways: int = 2, shots: int = 1,
                seed: int = 0) -> list[Trial]:
    """`n_trials` seeded trials: `n_ways` distinct classes of those with at least `shots` + 1
    items, `shots` demonstrations per class, a query item distinct from its class's demos; the
    query class cycles so that every way is asked equally often."""
    if not 2 <= n_ways <= len(LABEL_WORDS):
        raise ConfigError(f"n_ways must lie in [2, {len(LABEL_WORDS)}], got {n_ways}")
    if shots < 1:
        raise ConfigError(f"shots per class must be >= 1, got {shots}")
    usable = [c for c, n in enumerate(items_per_class) if n >= shots + 1]
    if len(usable) < n_ways:
        raise ConfigError(f"{n_ways} ways need {n_ways} classes with at least {shots + 1} items; "
                          f"{len(usable)} have them")
    rng = np.random.default_rng([seed, 6007])
    trials = []
    for t in range(n_trials):
        classes = [usable[i] for i in rng.choice(len(usable), n_ways, replace=False)]
        words = [str(w) for w in rng.permutation(list(LABEL_WORDS))[:n_ways]]
        picks = [rng.choice(items_per_class[c], shots + 1, replace=False) for c in classes]
        demos = [(c, int(p[j])) for c, p in zip(classes, picks) for j in range(shots)]
        order = rng.permutation(len(demos))
        asked = t % n_ways
        trials.append(Trial(tuple(demos[i] for i in order), tuple(words[i // shots] for i in order),
                            (classes[asked], int(picks[asked][shots])), words[asked]))
    return trials


@torch.no_grad()
def score_trials(model: torch.nn.Module, processor: object, trials: Sequence[Trial],
                 demo_picture: Callable[[int, int], Image.Image], query_picture: Callable[[int, int], Image.Image],
                 *, with_demos: bool = True) -> list[dict]:
    """One record per trial: {trial, answer, prediction, correct, shots}; the prediction is the
    allowed word of largest summed log-likelihood. `demo_picture(class, item)` and
    `query_picture(class, item)` draw the pictures (e.g. of different domains); `with_demos`
    False asks the same question with no demonstration (0-shot)."""
    model.eval()
    records = []
    for t, trial in enumerate(trials):
        allowed = sorted(set(trial.words))
        demos = trial.demos if with_demos else ()
        messages = demonstration_messages(defined_label_question(allowed), list(trial.words)[: len(demos)])
        pictures = [demo_picture(*d) for d in demos] + [query_picture(*trial.query)]
        scores = option_logliks(model, processor, messages, allowed, images=pictures)
        prediction = allowed[int(np.argmax(scores.sum))]
        records.append({"trial": t, "answer": trial.answer, "prediction": prediction,
                        "correct": prediction == trial.answer, "shots": len(demos)})
    return records
