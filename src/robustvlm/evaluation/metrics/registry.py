"""The generation metrics, each declared once: what eval, studies, reports and the CLI read.

A metric is a `Metric` in `METRICS`: its name (in `eval.metrics`, predictions.jsonl's `scores`
and metrics.json), column title, scale, direction, what it needs, when it is computed and its
scoring function. Adding a metric is one entry here, its function and a test.

When a metric is computed (`Metric.when`) fixes its function's signature:

  PER_BATCH         score(predictions, references) -> list[float]: N scores from N
                    (prediction, reference) string pairs, computed as each generated batch is
                    written, for every row whatever eval.metrics lists (they need nothing else).
  AFTER_GENERATION  score(rows, cfg, out_dir) -> bool: sets row["scores"][name] on the rows
                    (as in predictions.jsonl) that lack it, so a resumed evaluation scores only
                    new rows, and returns True when any row changed; run only when named in
                    eval.metrics. cfg is the EvalConfig, out_dir the evaluation folder (caches).

Every score is on the 0-1 scale, higher is better; None in a row means undecided, left out of
the means (never counted as 0).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from robustvlm.errors import ConfigError
from robustvlm.evaluation.metrics.chrf import chrf_scores
from robustvlm.evaluation.metrics.exact import exact_match
from robustvlm.evaluation.reference_scores import add_bertscore, add_cee, cee_counts
from robustvlm.extras import require
from robustvlm.plugins import load_plugins

PER_BATCH: Final = "per batch"
AFTER_GENERATION: Final = "after generation"


@dataclass(frozen=True)
class Needs:
    """A setting a metric needs beyond the predictions and references.

    Attributes:
        key: the eval config field holding it, e.g. "judge" (`eval.judge`).
        what: what it is, in a word or two, e.g. "judge".
        how: what to set it to, e.g. "an OpenAI-compatible endpoint".
        default: what is used when the field is not set; None: nothing, the metric cannot run.
        extra: the optional extra that provides `default` (checked before any work when the
            field is not set).
    """

    key: str
    what: str
    how: str
    default: str | None = None
    extra: str | None = None

    @property
    def required(self) -> bool:
        """True when the metric cannot run without it (there is no default)."""
        return self.default is None


@dataclass(frozen=True)
class Metric:
    """One generation metric.

    Attributes:
        name: its key in eval.metrics, in each row's scores and in metrics.json.
        title: its column header in reports.
        when: PER_BATCH or AFTER_GENERATION (see the module docstring: it fixes `score`).
        score: the scoring function.
        needs: the setting it needs, if any (an encoder, a judge endpoint).
        study_default: a column of a study's Table 1 when the study lists no metrics.
        counts: rows -> extra counts written to metrics.json as "<name>_counts" (e.g. CEE's
            undecided samples), or None.
        scale: the range of its scores.
        higher_is_better: its direction.
    """

    name: str
    title: str
    when: Literal["per batch", "after generation"]
    score: Callable[..., Any]
    needs: Needs | None = None
    study_default: bool = False
    counts: Callable[[list[dict]], dict] | None = None
    scale: str = "0-1"
    higher_is_better: bool = True

    def missing(self, settings: Mapping[str, Any]) -> Needs | None:
        """The required setting that `settings` (eval config fields by name) leave unset, or None."""
        needs = self.needs
        if needs is not None and needs.required and not settings.get(needs.key):
            return needs
        return None


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("chrf", "chrF", PER_BATCH, chrf_scores, study_default=True),
        Metric("exact", "exact", PER_BATCH, exact_match),
        Metric(
            "bertscore",
            "BERTScore",
            AFTER_GENERATION,
            add_bertscore,
            needs=Needs("bertscore", "encoder", "any HF encoder", default="all-MiniLM-L6-v2", extra="metrics"),
            study_default=True,
        ),
        Metric(
            "cee",
            "CEE",
            AFTER_GENERATION,
            add_cee,
            needs=Needs("judge", "judge", "an OpenAI-compatible endpoint"),
            study_default=True,
            counts=cee_counts,
        ),
    )
}


def check_metric_names(names: object, key: str = "eval.metrics") -> None:
    """Raise ConfigError naming `key` unless `names` is a list of registered metric names."""
    if isinstance(names, (list, tuple)) and any(n not in METRICS for n in names):
        load_plugins()
    known = ", ".join(METRICS)
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"{key}: a list of metric names is required (got {names!r}); known: {known}")
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        listed = ", ".join(repr(n) for n in unknown)
        raise ConfigError(f"{key}: unknown metric(s) {listed}; known metrics: {known}")


def check_needs(names: Sequence[str], settings: Mapping[str, Any]) -> None:
    """Raise ConfigError when a metric in `names` lacks the eval setting it needs, and
    MissingExtra when it falls back on a default whose extra is not installed."""
    for name in names:
        needs = METRICS[name].missing(settings)
        if needs is not None:
            raise ConfigError(
                f"eval.metrics includes '{name}' but eval.{needs.key} "
                f"(the {needs.what}: {needs.how}) is not set"
            )
        needs = METRICS[name].needs
        if needs is not None and needs.extra is not None and not _model_named(settings.get(needs.key)):
            require(needs.extra, f"eval.metrics includes '{name}', whose default {needs.what} ({needs.default})")


def _model_named(section: Any) -> bool:
    """Whether a setting section (a config model or its dict, e.g. eval.bertscore) names a model."""
    if isinstance(section, Mapping):
        return bool(section.get("model"))
    return bool(getattr(section, "model", None))


def per_batch_metrics() -> list[Metric]:
    """The metrics computed for every generated batch, in registry order."""
    return [m for m in METRICS.values() if m.when == PER_BATCH]


def after_generation_metrics(names: Sequence[str]) -> list[Metric]:
    """The metrics of `names` computed after generation, in registry order."""
    return [m for m in METRICS.values() if m.when == AFTER_GENERATION and m.name in names]


def study_default_metrics() -> list[str]:
    """The columns of a study's Table 1 when it lists none (the paper's chrF, BERTScore, CEE)."""
    return [m.name for m in METRICS.values() if m.study_default]


def title(name: str) -> str:
    """The column header of metric `name`."""
    return METRICS[name].title


def add_after_generation_scores(rows: list[dict], cfg: Any, out_dir: Any) -> bool:
    """Fill in the after-generation metrics named in `cfg.metrics` on the rows lacking them.

    Args:
        rows: prediction rows (id, env, ood, instruction, prediction, target, scores), changed
            in place.
        cfg: the EvalConfig (metric names, BERTScore encoder, judge).
        out_dir: the evaluation folder, where a metric may keep a cache (the judge's verdicts).

    Returns:
        True when any row changed.
    """
    check_needs(cfg.metrics, dict(cfg))
    changed = False
    for metric in after_generation_metrics(cfg.metrics):
        changed |= metric.score(rows, cfg, out_dir)
    return changed
