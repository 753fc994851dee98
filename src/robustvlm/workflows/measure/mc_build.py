"""`robustvlm mc build`: K-way multiple-choice questions from labelled images."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from robustvlm.data.loaders import load_examples
from robustvlm.errors import ConfigError
from robustvlm.models.backends import load_backend
from robustvlm.multiple_choice.build import MCQuestion, build_questions, write_questions
from robustvlm.multiple_choice.distractors import ImageEmbedder
from robustvlm.runs import prepare_output_file


def load_image_embedder(name_or_path: str, *, batch_size: int = 32) -> ImageEmbedder:
    """The embedder of `visual` distractors: RGB images -> unit-norm embeddings [n, d], the
    family's own image embedding of a model named as in `mc eval` (CLIP / SigLIP, a VLM's vision
    tower, an embedding model; ConfigError when its family cannot embed images)."""
    backend = load_backend(name_or_path)
    backend.require("image_embed")
    return partial(backend.embed_images, batch_size=batch_size)


def build_benchmark(
    data: str | Path,
    out: str | Path,
    *,
    distractors: str = "random",
    vision_model: str | None = None,
    text_encoder: str | None = None,
    image_root: str | Path | None = None,
    allow_outside_root: bool = False,
    link_images: bool = False,
    overwrite: bool = False,
    envs: list[str] | None = None,
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
    not hold is an error listing the ones it does.
    """
    if (distractors == "visual") != bool(vision_model):
        raise ConfigError(
            "--distractors visual needs --vision-model (a CLIP/SigLIP or VLM name or folder, "
            "e.g. tiny:clip), and --vision-model applies only to --distractors visual"
        )
    if text_encoder and distractors != "text":
        raise ConfigError("--text-encoder applies only to --distractors text")
    prepare_output_file(Path(out), overwrite=overwrite)
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
    write_questions(questions, out, embed_images=not link_images)
    return questions
