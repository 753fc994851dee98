"""Measure the three gaps of `analysis.diagnosis` on a VLM and an image-folder domain dataset.

    visual    `vision_features` (the image tokens the language model receives, mean-pooled)
              -> `linear_probe_accuracy` within each domain
    semantic  `semantic_accuracy`: text-only questions "which class name matches this
              description?" (WordNet glosses, or given descriptions), scored by the
              summed log-likelihood of each class name as the answer
              (`models.loglik.option_logliks`, text-only prompt)
    mapping   zero-shot and k-shot accuracy from `evaluation.in_context.evaluate_icl` (run by the
              caller, which may split it between processes: `workflows.measure.diagnose`)

A model that cannot take a measurement gets None for it, never a guess: a served model has no
vision tower to probe, and its semantic questions need a server that returns prompt
log-probabilities (`models.served`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from robustvlm.analysis.diagnosis import linear_probe_accuracy
from robustvlm.analysis.in_context_accuracy import IclCell
from robustvlm.data.images import load_image
from robustvlm.data.records import Example
from robustvlm.errors import DataError
from robustvlm.evaluation.icl_settings import InContextSettings
from robustvlm.evaluation.in_context import ZERO_SHOT
from robustvlm.extras import require
from robustvlm.models.backends import Backend
from robustvlm.models.served import LoglikUnavailable
from robustvlm.redact import redacted_logger

logger = redacted_logger(__name__)


def vision_features(backend: Backend, examples: Sequence[Example], *, batch_size: int = 16) -> np.ndarray:
    """The image features the language model receives (vision tower + connector, mean-pooled
    over tokens and crops, not normalised: `models.vision`), one row per example: [N, D]."""
    chunks = [examples[start : start + batch_size] for start in range(0, len(examples), batch_size)]
    return np.concatenate([
        backend.embed_images([load_image(ex.image, source=ex.source, record=ex.id) for ex in chunk],
                             batch_size=batch_size, normalize=False)
        for chunk in chunks
    ])


def class_descriptions(
    class_names: Sequence[str], descriptions: Mapping[str, str] | None = None
) -> dict[str, str]:
    """A description per class: the given one, else the gloss of its WordNet noun synset.

    Raises DataError naming a class with neither (or ConfigError when WordNet is needed but
    not installed).
    """
    given = dict(descriptions or {})
    out = {}
    for name in class_names:
        if name in given:
            out[name] = given[name]
            continue
        require("wordnet", f"class {name!r} has no description: WordNet's gloss")
        from robustvlm.data.wordnet import class_synset, open_wordnet

        try:
            out[name] = class_synset(name, open_wordnet()).definition()
        except DataError as exc:
            raise DataError(f"{exc.message}; or give its description in `descriptions`") from exc
    return out


def semantic_question(description: str, options: Sequence[str]) -> list[dict]:
    """Text-only conversation asking which class name matches a description."""
    text = (f"Which of these names matches the description \"{description}\"? "
            f"Options: {', '.join(options)}. Answer with the name.")
    return [{"role": "user", "content": [{"type": "text", "text": text}]}]


def semantic_accuracy(
    backend: Backend,
    descriptions: Mapping[str, str],
    *,
    n_orders: int = 2,
    seed: int = 0,
) -> tuple[float, list[dict]]:
    """Share of (class, option order) questions whose most likely answer is the class name.

    Each class is asked `n_orders` times with the options in a seeded random order.
    Returns (accuracy, one record per question).
    """
    names = sorted(descriptions)
    rng = np.random.default_rng([seed, 31337])
    records = []
    for name in names:
        for _ in range(n_orders):
            options = [names[i] for i in rng.permutation(len(names))]
            scores = backend.option_logliks(semantic_question(descriptions[name], options), options).sum
            records.append({"class": name, "options": options, "answer": options[int(np.argmax(scores))],
                            "logliks": scores})
    return float(np.mean([r["answer"] == r["class"] for r in records])), records


@dataclass(frozen=True)
class DomainMeasurements:
    """What `measure_domains` measured.

    Attributes:
        rows: per domain {domain, n_classes, n_images, probe_acc, semantic_acc, zero_shot_acc,
            icl_acc}: the input rows of `analysis.diagnosis.diagnose_table` (icl_acc is None
            when shots == 0).
        icl_cells: the in-context evaluation behind zero_shot_acc and icl_acc.
        semantic_records: one record per text-only semantic question.
    """

    rows: list[dict]
    icl_cells: list[IclCell]
    semantic_records: list[dict]


def _semantic_or_none(backend: Backend, descriptions: Mapping[str, str], seed: int) -> tuple[float | None, list[dict]]:
    """`semantic_accuracy`, or (None, []) when the model cannot score options (module doc)."""
    if not backend.supports("option_loglik"):
        return None, []
    try:
        return semantic_accuracy(backend, descriptions, seed=seed)
    except LoglikUnavailable as exc:
        logger.warning("semantic stage not measured: %s", exc)
        return None, []


def measure_domains(
    backend: Backend,
    examples: Sequence[Example],
    icl_cells: Sequence[IclCell],
    settings: InContextSettings,
    *,
    descriptions: Mapping[str, str] | None = None,
    probe_test_fraction: float = 0.5,
) -> DomainMeasurements:
    """The three measurements per domain (see DomainMeasurements), the mapping one read from
    `icl_cells`: `evaluation.in_context.evaluate_icl` of `examples` with `settings` (0 shots and
    `settings.most_shots` shots of the policy `settings.policies[0]`)."""
    shots, policy = settings.most_shots, settings.policies[0]
    by_domain: dict[str, list[Example]] = defaultdict(list)
    for ex in examples:
        by_domain[ex.env].append(ex)
    accuracy = {(c.policy, c.domain): c.accuracy for c in icl_cells}
    semantic: dict[tuple[str, ...], tuple[float | None, list[dict]]] = {}
    rows = []
    for domain in sorted(by_domain):
        group = by_domain[domain]
        classes = tuple(sorted({ex.target for ex in group}))
        if classes not in semantic:
            semantic[classes] = _semantic_or_none(backend, class_descriptions(classes, descriptions), settings.seed)
        probe = None
        if backend.supports("image_embed"):
            probe = linear_probe_accuracy(vision_features(backend, group), [ex.target for ex in group],
                                          test_fraction=probe_test_fraction, seed=settings.seed)
        rows.append({
            "domain": domain,
            "n_classes": len(classes),
            "n_images": len(group),
            "probe_acc": probe,
            "semantic_acc": semantic[classes][0],
            "zero_shot_acc": accuracy[(ZERO_SHOT, domain)],
            "icl_acc": accuracy[(policy, domain)] if shots else None,
        })
    return DomainMeasurements(rows, list(icl_cells), [r for _, recs in semantic.values() for r in recs])
