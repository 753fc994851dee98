"""`robustvlm mc build`: K-way multiple-choice questions from labelled images.

With `filter_blind`, the questions a blind model answers are dropped
(`multiple_choice.blind_filter`) and the filter's report goes beside the questions file:
`<out stem>.blind_filter.json` (model, rule, counts per environment, dropped ids).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from robustvlm.config import ServedConfig
from robustvlm.data.loaders import load_examples
from robustvlm.errors import ConfigError, DataError
from robustvlm.model_ref import ModelRef
from robustvlm.models.backends import infer_family, load_backend, served_settings
from robustvlm.models.blind import BlindBackend, blind_input
from robustvlm.models.hub import checked_hub_name
from robustvlm.multiple_choice.blind_filter import FilterReport, answered_blind, drop_answered
from robustvlm.multiple_choice.build import MCQuestion, build_questions, write_question_rows
from robustvlm.multiple_choice.distractors import ImageEmbedder
from robustvlm.multiple_choice.scoring import METHODS, make_scorer, scoring_method
from robustvlm.runs import check_output_file, prepare_output_file, write_output_file


@dataclass(frozen=True)
class BlindFilter:
    """`mc build --filter-blind`: the blind model, how it scores (`mc eval`'s method) and the
    server of a served one."""

    model: ModelRef
    method: str = "loglik"
    served: ServedConfig | None = None
    batch_size: int = 8

    def check(self) -> None:
        """ConfigError for an unknown method or a served model without a server (and the reverse)."""
        if self.method not in METHODS:
            raise ConfigError(f"--filter-method must be one of {METHODS}, got '{self.method}'")
        served_settings(self.model, self.served)


def filter_report_path(out: str | Path) -> Path:
    """Where the blind filter's report of the questions file `out` goes."""
    out = Path(out)
    return out.with_name(f"{out.stem}.blind_filter.json")


def apply_blind_filter(questions: list[MCQuestion], spec: BlindFilter) -> tuple[list[MCQuestion], FilterReport]:
    """Score `questions` with `spec.model` blind and drop those it answers (module docstring)."""
    family = infer_family(spec.model)
    way = scoring_method(family, spec.method)
    backend = BlindBackend(load_backend(spec.model, family, served=spec.served))
    scorer = make_scorer(backend, way=way, normalize=True)
    answered = answered_blind(questions, scorer, batch_size=spec.batch_size)
    return drop_answered(questions, answered, model=spec.model, method=way, blind_input=blind_input(family))


def load_image_embedder(model: ModelRef, *, batch_size: int = 32) -> ImageEmbedder:
    """The embedder of `visual` distractors: RGB images -> unit-norm embeddings [n, d], the
    family's own image embedding of a model named as in `mc eval` (CLIP / SigLIP, a VLM's vision
    tower, an embedding model; ConfigError when its family cannot embed images)."""
    backend = load_backend(model)
    backend.require("image_embed")
    return partial(backend.embed_images, batch_size=batch_size)


def _check_distractor_models(distractors: str, vision_model: ModelRef | None, text_encoder: str | None) -> None:
    """ConfigError unless the distractor method and its model options agree; a key-like text
    encoder name is refused here, before any work or network access."""
    if (distractors == "visual") != bool(vision_model):
        raise ConfigError(
            "--distractors visual needs --vision-model (a CLIP/SigLIP or VLM name or folder, "
            "e.g. tiny:clip), and --vision-model applies only to --distractors visual"
        )
    if text_encoder and distractors != "text":
        raise ConfigError("--text-encoder applies only to --distractors text")
    if text_encoder:
        checked_hub_name(str(text_encoder), "text encoder name", reach=False)


def build_benchmark(
    data: str | Path,
    out: str | Path,
    *,
    distractors: str = "random",
    vision_model: ModelRef | None = None,
    text_encoder: str | None = None,
    image_root: str | Path | None = None,
    allow_outside_root: bool = False,
    link_images: bool = False,
    overwrite: bool = False,
    envs: list[str] | None = None,
    filter_blind: BlindFilter | None = None,
    **options: Any,
) -> list[MCQuestion]:
    """Load labelled images, build questions (`build_questions` with `options`: k, n, seed,
    class_subset, class_names, prompt, circular) and write them to `out`: the images embedded
    (a self-contained file), or with `link_images` their absolute paths (scoring then needs
    `--image-root` or `--allow-outside-root`).

    `vision_model` is the model of `visual` distractors and `text_encoder` the sentence encoder of
    `text` distractors; each is an error with any other distractor method. An existing `out`
    is replaced only with `overwrite`. `envs` keeps the
    images of those environments (domains) only: one benchmark per domain; a name the data does
    not hold is an error listing the ones it does. `filter_blind` drops the questions its model
    answers blind and writes its report (`filter_report_path`).
    """
    _check_distractor_models(distractors, vision_model, text_encoder)
    if filter_blind is not None:
        filter_blind.check()
    prepare_output_file(Path(out), overwrite=overwrite)
    check_output_file(filter_report_path(out))  # beside it: never a file of the user's
    examples = load_examples(data, image_root=image_root, allow_outside_root=allow_outside_root)
    if envs:
        held = sorted({ex.env for ex in examples})
        unknown = [e for e in envs if e not in held]
        if unknown:
            raise ConfigError(f"--env {', '.join(unknown)}: not in {data} (its environments: {', '.join(held)})")
        examples = [ex for ex in examples if ex.env in envs]
    questions = build_questions(
        examples,
        distractors=distractors,
        encoder=text_encoder,
        image_embedder=load_image_embedder(vision_model) if vision_model else None,
        **options,
    )
    filter_report_path(out).unlink(missing_ok=True)  # a stale report of an overwritten file
    if filter_blind is not None:
        questions, report = apply_blind_filter(questions, filter_blind)
        write_output_file(filter_report_path(out), lambda handle: handle.write(json.dumps(report.to_dict(), indent=2)))
        if not questions:
            raise DataError(f"the blind model {filter_blind.model!r} answers every question; nothing is left "
                            f"(see {filter_report_path(out)})")
    write_output_file(Path(out), partial(write_question_rows, questions, embed_images=not link_images))
    return questions
