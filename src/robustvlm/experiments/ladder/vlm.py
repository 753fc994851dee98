"""The invariance ladder's VLM rungs (`experiments.ladder.run`): the generative model asked a
two-option question about each Colored MNIST picture, trained on the answer tokens with the
objective classes `train` uses (`training.answer_fit`).

A VLM rung (`experiments.ladder.rung.Rung`, id `vlm:<mode>:<model>`), mode:

- `head` (the issue's rung 3, the answer head): vision tower and text decoder frozen; the
  projector (`connector`) and a LoRA on the last decoder layer trained (`train`'s
  `trainable: lora` with `lora.target_modules` on that layer and `lora.modules_to_save:
  [connector]`);
- `lora`, `full` (rung 4): `train`'s `trainable: lora` (every decoder layer) and `full`.

The model is the tiny offline Idefics3 (random weights), built per seed, so the seed sets the
frozen backbone as well as the batches, its pictures resized by the processor to `image_size`;
or a pretrained model (`zoo:NAME`, `demo ladder --zoo`), the same in every seed (the seed sets
the batches and the LoRA's initial weights), with its own processor and image size. The
pictures are the rung's 14 x 14 inputs drawn as RGB (channel 0 red, channel 1 green; the
grayscale oracle's the summed channels in all three). The question and the two answers are the built-in benchmark's for the source
(`digits` for mnist, `fashion-spurious` for fashion).
"""

from __future__ import annotations

import hashlib
import io
import re
from typing import Any, cast

import numpy as np
import torch
from PIL import Image

from robustvlm.data.collate import VLMCollator
from robustvlm.data.records import Example
from robustvlm.data.synth import digits
from robustvlm.data.synth.real import SPURIOUS_ANSWERS, SPURIOUS_INSTRUCTION
from robustvlm.experiments.ladder.paired import to_bits
from robustvlm.experiments.ladder.plan import VLMRungPlan
from robustvlm.experiments.ladder.rung import VLM, Rung
from robustvlm.model_ref import TINY, ModelRef
from robustvlm.models.answer import AnswerModel
from robustvlm.models.loading import load_vlm
from robustvlm.models.trainable import DECODER_PROJECTIONS, configure_trainable, find_parts
from robustvlm.objectives import Objective
from robustvlm.training.answer_fit import AnswerRows, candidate_correct, env_rows, fit_answer

QUESTIONS = {"mnist": (digits.INSTRUCTION, digits.ANSWERS), "fashion": (SPURIOUS_INSTRUCTION, SPURIOUS_ANSWERS)}


def _model(rung: Rung) -> ModelRef:
    """A VLM rung's model; ValueError for another rung."""
    if rung.kind != VLM or rung.model is None:
        raise ValueError(f"{rung.id!r} is not a VLM rung")
    return rung.model


def rgb_pictures(planes: np.ndarray) -> list[Image.Image]:
    """[n, c, h, w] inputs in [0, 1] as RGB pictures: c = 2, channel 0 red and channel 1 green;
    c = 1, grey (the plane in all three)."""
    rgb = planes.repeat(3, 1) if planes.shape[1] == 1 else np.concatenate([planes, np.zeros_like(planes[:, :1])], 1)
    pixels = (np.clip(rgb, 0, 1) * 255).astype(np.uint8).transpose(0, 2, 3, 1)
    return [Image.fromarray(p) for p in pixels]


def _png(picture: Image.Image) -> bytes:
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    return buffer.getvalue()


def build_vlm(rung: Rung, seed: int, source: str, image_size: int) -> tuple[torch.nn.Module, Any]:
    """(the rung's model with its trainable parameters set, processor). A `tiny:` model's weights
    come from `seed` (its pictures resized to `image_size`); a pretrained model (`zoo:NAME`, a
    folder, a hub name) is the same in every seed, with its own processor and image size, and the
    seed sets the LoRA's initial weights (and, in `fit_answer`, the batches)."""
    mode, ref = rung.mode, _model(rung)
    question, answers = QUESTIONS[source]
    tiny = ref.kind == TINY
    model, processor = load_vlm(ref, tiny_options={"image_size": image_size, "seed": seed} if tiny else None,
                                corpus=[question, *answers] if tiny else None)
    torch.manual_seed(seed)  # the LoRA's initial weights
    if mode == "head":
        parts = find_parts(model)
        last = len(cast(torch.nn.ModuleList, parts.decoder.layers)) - 1
        targets = rf"{re.escape(parts.decoder_path)}\.layers\.{last}\..*\.({'|'.join(DECODER_PROJECTIONS)})"
        projector = next(n for n, m in model.named_modules() if m is parts.projector).rsplit(".", 1)[-1]
        return configure_trainable(model, mode="lora", lora={"target_modules": targets,
                                                              "modules_to_save": [projector]}), processor
    return configure_trainable(model, mode=mode), processor


def answer_rows(processor: Any, source: str, inputs: np.ndarray, labels: np.ndarray, env_id: dict[str, int],
                env: str) -> AnswerRows:
    """One environment's rows: [n, c * 14 * 14] inputs (c = 2 coloured, 1 grey), [n] 0/1 labels."""
    question, answers = QUESTIONS[source]
    pictures = rgb_pictures(inputs.reshape(len(inputs), -1, 14, 14))
    examples = [Example(f"{env}-{i}", _png(p), question, answers[int(y)], env)
                for i, (p, y) in enumerate(zip(pictures, labels))]
    candidates = torch.tensor([processor.tokenizer.encode(a, add_special_tokens=False)[0] for a in answers])
    return env_rows(VLMCollator(processor, env_id, train=True), examples, candidates)


_KEPT_ROWS: dict[str, dict[str, AnswerRows]] = {}
KEPT_ROWS = 2  # the coloured and the grey pictures of one rung: a worker's consecutive runs


def environment_rows(processor: Any, source: str, image_size: int, inputs: dict[str, np.ndarray],
                     labels: dict[str, np.ndarray], env_id: dict[str, int],
                     model: ModelRef | None = None) -> dict[str, AnswerRows]:
    """`answer_rows` of every environment, kept in this process for the next runs on the same
    pictures and `model`: they depend on the pictures, the question, `image_size` and the
    model's processor (a tiny tokenizer is trained on the question alone), not on the seed or the
    method."""
    digest = hashlib.sha256(repr((source, image_size, model.name if model else "", sorted(env_id.items()))).encode())
    for name in sorted(inputs):
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(inputs[name]).tobytes())
        digest.update(np.ascontiguousarray(labels[name]).tobytes())
    key = digest.hexdigest()
    if key not in _KEPT_ROWS:
        while len(_KEPT_ROWS) >= KEPT_ROWS:
            del _KEPT_ROWS[next(iter(_KEPT_ROWS))]
        _KEPT_ROWS[key] = {name: answer_rows(processor, source, inputs[name], labels[name], env_id, name)
                           for name in inputs}
    return _KEPT_ROWS[key]


def vlm_evaluations(
    objective: Objective,
    rung: Rung,
    source: str,
    seed: int,
    plan: VLMRungPlan,
    inputs: dict[str, np.ndarray],
    labels: dict[str, np.ndarray],
    splits: dict[str, tuple[np.ndarray, np.ndarray]],
) -> list[dict[str, Any]]:
    """Train the rung's model on the training rows of the training environments (`splits`:
    name -> (training rows, held-out rows); their order is the objective's env ids) and return
    its evaluations: [{"step", "acc": {env: accuracy on all its rows}, "val": {training env:
    accuracy on its held-out rows}, "correct": {test env (not in `splits`): its rows' correctness
    as `experiments.ladder.paired.to_bits`}}] (accuracies 0-1)."""
    vlm, processor = build_vlm(rung, seed, source, plan.image_size)
    env_id = {name: i for i, name in enumerate(splits)}
    rows = environment_rows(processor, source, plan.image_size, inputs, labels, env_id, _model(rung))
    evaluations: list[dict[str, Any]] = []

    def evaluate(step: int, model: AnswerModel) -> None:
        correct = {name: candidate_correct(model, r) for name, r in rows.items()}
        evaluations.append({
            "step": step,
            "acc": {name: float(c.mean()) for name, c in correct.items()},
            "val": {name: float(correct[name][held].mean()) for name, (_, held) in splits.items()},
            "correct": {name: to_bits(c) for name, c in correct.items() if name not in splits},
        })

    train = [AnswerRows(rows[name].take(kept), rows[name].candidates) for name, (kept, _) in splits.items()]
    fit_answer(objective, vlm, train, steps=plan.steps, lr=plan.lr, batch_size=plan.batch_size, seed=seed,
               candidates_only=plan.candidates_only, eval_every=plan.eval_every, on_eval=evaluate)
    return evaluations
