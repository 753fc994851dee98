"""The inputs of the task-signal experiment, written once into its folder and reused.

    data/STYLE/CLASS/NNNN.png          the built-in `mnist` suite (`per_class` real MNIST digits
                                       per class, drawn in every style)
    data/base.jsonl                    generative pretraining records of the shared base VLM:
                                       every training image with its caption and with each of
                                       its questions (inside the VQA instruction)
    data/<family>.jsonl                the family's contrastive pairs (below)
    questions/<style>.jsonl            K-way questions "What digit is shown?" about the
                                       held-out digits of the reference and each shifted style

Fair by construction: every family trains on the same images, `len(described)` pairs per image
(one slot per described attribute), so equal steps mean equal pairs. In a family with VQA share
s, slot j of an image is its question about attribute j with probability s (a seeded draw fixed
per family, the same for all its seeds and budgets), else its caption; captions and questions
state the same attributes (`data.synth.digit_attributes`). Caption pairs live in environment
"caption" (their query is the image alone), VQA pairs in "vqa/<attribute>".
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from robustvlm.config import TaskSignalConfig
from robustvlm.data.loaders import load_examples
from robustvlm.data.records import Example
from robustvlm.data.synth.digit_attributes import (
    QUESTIONS,
    attributes,
    caption,
    question_answers,
    varying,
)
from robustvlm.data.synth.held_out import DATA_SEED, held_out_indices, synthesize_suite
from robustvlm.models.embedding import query_text
from robustvlm.multiple_choice.build import build_questions, write_questions
from robustvlm.runs import write_jsonl

SUITE = "mnist"  # real MNIST digits, drawn in the digit styles
CAPTION_ENV = "caption"
CAPTION_INSTRUCTION = "Describe the image."  # shown in generative pretraining only


@dataclass(frozen=True)
class SignalData:
    """The experiment's inputs on disk (see the module doc).

    Attributes:
        train: the training images (one Example per image, target = digit).
        described: the attributes captions state and questions ask (those that vary).
        base_jsonl: generative pretraining records of the base VLM.
        family_jsonl: {family: its pairs}.
        benches: {style: question file}, the reference style first.
        n_questions: questions per style.
    """

    train: list[Example]
    described: list[str]
    base_jsonl: Path
    family_jsonl: dict[str, Path]
    benches: dict[str, Path]
    n_questions: int


def _record(ex: Example, slot: str, instruction: str, target: str, env: str) -> dict:
    return {"id": f"{ex.env}/{ex.id}#{slot}", "image": str(Path(str(ex.image)).absolute()),
            "instruction": instruction, "target": target, "env": env, "split": "train"}


def _written(path: Path, rows: list[dict]) -> Path:
    """`path`, once `rows` are written to it (`runs.write_jsonl`)."""
    write_jsonl(path, rows)
    return path


def family_pairs(train: list[Example], attrs: dict[str | bytes | None, dict[str, str]], described: list[str],
                 name: str, vqa_share: float) -> list[dict]:
    """The pair records of one family (see the module doc); VQA records carry the bare question
    (the embedding task wraps it in the instruction)."""
    rng = np.random.default_rng([DATA_SEED, zlib.crc32(name.encode("utf-8"))])
    rows = []
    for ex in train:
        a = attrs[ex.image]
        for attribute, (question, answer) in zip(described, question_answers(a, described)):
            if rng.random() < vqa_share:
                rows.append(_record(ex, attribute, question, answer, f"vqa/{attribute}"))
            else:
                rows.append(_record(ex, attribute, CAPTION_INSTRUCTION, caption(a, described), CAPTION_ENV))
    return rows


def base_records(train: list[Example], attrs: dict[str | bytes | None, dict[str, str]], described: list[str],
                 query_template: str) -> list[dict]:
    """Generative pretraining records: each image's caption and each of its questions."""
    rows = []
    for ex in train:
        a = attrs[ex.image]
        rows.append(_record(ex, "caption", CAPTION_INSTRUCTION, caption(a, described), CAPTION_ENV))
        rows += [_record(ex, attribute, query_text(q, query_template), answer, f"vqa/{attribute}")
                 for attribute, (q, answer) in zip(described, question_answers(a, described))]
    return rows


def prepare_data(out: Path, cfg: TaskSignalConfig) -> SignalData:
    """Synthesise the suite (reused when present), split it, write the pairs and the questions."""
    root = synthesize_suite(out / "data", SUITE, cfg.per_class)
    examples = load_examples(root, fmt="folder", instruction_template=QUESTIONS["digit"], verbose=False)
    held = held_out_indices(cfg.per_class, cfg.test_fraction, sorted({ex.target for ex in examples}))

    def is_held(ex: Example) -> bool:
        return int(Path(ex.id).stem) in held[ex.target]

    train = [ex for ex in examples if ex.env in cfg.train_styles and not is_held(ex)]
    attrs = {ex.image: attributes(ex) for ex in train}
    described = varying(list(attrs.values()))
    template = cfg.embed.query_template
    family_jsonl = {
        name: _written(out / "data" / f"{name}.jsonl",
                           family_pairs(train, attrs, described, name, share))
        for name, share in cfg.families.items()
    }
    base_jsonl = _written(out / "data" / "base.jsonl", base_records(train, attrs, described, template))
    benches = {}
    for style in dict.fromkeys([cfg.reference, *cfg.shifts]):
        held_out = [ex for ex in examples if ex.env == style and is_held(ex)]
        questions = build_questions(held_out, k=cfg.k_options, distractors="random", seed=DATA_SEED,
                                    prompt=QUESTIONS["digit"])
        benches[style] = out / "questions" / f"{style}.jsonl"
        write_questions(questions, benches[style])
        if style == cfg.reference:
            n_questions = len(questions)
    return SignalData(train, described, base_jsonl, family_jsonl, benches, n_questions)
