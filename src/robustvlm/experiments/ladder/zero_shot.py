"""What a pretrained VLM of the invariance ladder reads before any fine-tuning (`demo ladder --zoo`).

Two readings per model, on the ladder's own pictures (14 x 14 scans in one of two colour
channels, `ladder_vlm.rgb_pictures`), coloured and grey (the channels summed, as the grayscale
oracle sees them):

- `ladder`: the ladder's question and its two answers, scored as the VLM rungs score them (the
  answer whose first token has the larger logit; `training.answer_fit.candidate_correct`),
  against the noisy labels the rungs are trained and scored on (the content rule's ceiling is
  75%) and against the clean group (classes 0-4 / 5-9);
- `ten_way` (the test environments only: their scans are Fashion-MNIST's test split, which
  pretraining never saw): the zoo's own held-out question (`workflows.zoo.data.ten_way_question`: the ten
  classes as lettered options, scored by summed option log-likelihood, `models.loglik`), its
  answer mapped to the ladder's group and compared with the clean group: whether the model reads
  the content of these pictures whatever the question's wording.

Accuracies are shares (0-1). Pretraining (`zoo build`) never showed the question's answers
("first", "second"), so `ladder` is near chance unless the model generalises to the wording;
`ten_way` is the content reading.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from robustvlm.data.colored_mnist import ColouredEnv
from robustvlm.data.real_images import FASHION_CLASSES
from robustvlm.experiments.ladder.results import ZeroShot
from robustvlm.experiments.ladder.vlm import answer_rows, rgb_pictures
from robustvlm.model_ref import ModelRef
from robustvlm.models.answer import AnswerModel
from robustvlm.models.loading import load_vlm
from robustvlm.models.loglik import option_logliks
from robustvlm.multiple_choice.generative import option_continuations
from robustvlm.training.answer_fit import candidate_correct
from robustvlm.workflows.zoo.data import ten_way_question, user_turn

#: Pictures per test environment that the ten-way question scores (ten options each).
TEN_WAY_PICTURES = 100
KINDS = ("coloured", "grey")


def _planes(env: ColouredEnv, kind: str) -> np.ndarray:
    """[n, c, 14, 14]: the coloured inputs, or the grey ones (channels summed, c = 1)."""
    return env.inputs if kind == "coloured" else env.inputs.sum(1, keepdims=True)


def ten_way_groups(model: torch.nn.Module, processor: Any, planes: np.ndarray) -> np.ndarray:
    """[n] 0/1: the ladder group (classes 0-4 / 5-9) of the model's answer to the ten-way question
    about each picture."""
    messages = [user_turn(ten_way_question())]
    continuations = option_continuations(FASHION_CLASSES)
    answers = [int(np.argmax(option_logliks(model, processor, messages, continuations, images=[p]).sum))
               for p in rgb_pictures(planes)]
    return (np.array(answers) >= 5).astype(np.int64)


def zero_shot(model_ref: ModelRef, source: str, envs: list[ColouredEnv], pictures: int = TEN_WAY_PICTURES) -> ZeroShot:
    """`model_ref`'s zero-shot readings (module doc) on `envs`, the ladder's environments."""
    model, processor = load_vlm(model_ref)
    model.eval()
    answer = AnswerModel(model)
    env_id = {e.name: i for i, e in enumerate(envs)}
    noisy: dict[str, dict[str, float]] = {}
    clean: dict[str, dict[str, float]] = {}
    ten_way: dict[str, dict[str, float]] = {}
    for kind in KINDS:
        noisy[kind], clean[kind], ten_way[kind] = {}, {}, {}
        for env in envs:
            planes = _planes(env, kind)
            rows = answer_rows(processor, source, planes.reshape(len(planes), -1), env.labels, env_id, env.name)
            correct = candidate_correct(answer, rows)
            noisy[kind][env.name] = float(correct.mean())
            # correct against the noisy label: the clean group is the label where the noise did not flip it
            clean[kind][env.name] = float((correct == (env.labels == env.clean)).mean())
            if env.ood:
                ten_way[kind][env.name] = float((ten_way_groups(model, processor, planes[:pictures])
                                                 == env.clean[:pictures]).mean())
    return ZeroShot(noisy, clean, ten_way, pictures)
