"""`robustvlm rm eval`: pairwise accuracy of a reward model per test environment, with the
text-only test (the same model scored without the image).

Outputs in OUT: `config.resolved.yaml`, `pairs.jsonl` (one row per pair as it is scored: id, env,
category where the benchmark names one, per view [r_chosen, r_rejected], and the swap check's
`swapped` [r_rejected, r_chosen]; `--resume` scores only the pairs not there yet), `metrics.json`
(`analysis.reward.RewardEvalMetrics`: accuracy, ties and a 95% bootstrap CI per environment,
category and view, the SFD against the model's own text-only verdicts, the swap check;
`skipped_records`, the bad records `--skip-bad` left out, listed in `skipped.jsonl`;
`training_pairs: true` when the training split was scored on purpose).

The swap check (on unless `eval.swap_check: false`) scores every pair a second time with chosen
and rejected swapped and stops at the first pair whose scores are not the first ones reversed
(a DataError naming it): swapped accuracy then equals 1 - accuracy - ties.

When the model's training run recorded its pair split (`pair_split.json` beside `final/`), the
pairs it trained on and held out take that split (`apply_training_split`), so the test split is
what the run held out, also where `data.split_per_env` carved it.

Scoring the training split (`--split train`) measures what the model may have learned by heart:
it needs `--score-training-pairs`, and the metrics say so.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from robustvlm.analysis.reward import RewardEvalMetrics, summarize_pair_rows, swap_check
from robustvlm.config import RewardEvalConfig
from robustvlm.data.preferences import PreferencePair
from robustvlm.data.records import SkipLog
from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.models.backends import load_backend
from robustvlm.models.backends.reward import RewardBackend
from robustvlm.models.reward import RewardModel
from robustvlm.models.support import require_capability
from robustvlm.reward.scoring import score_pairs, training_view
from robustvlm.reward.task import read_pair_split
from robustvlm.runs import read_jsonl
from robustvlm.sharding import claim, helpers_stop_here, score_rows, share

PAIRS_FILE = "pairs.jsonl"
METRICS_FILE = "metrics.json"
SKIPPED_FILE = "skipped.jsonl"


def eval_pairs(pairs: list[PreferencePair], cfg: RewardEvalConfig, source: str = "") -> list[PreferencePair]:
    """The pairs of split `cfg.split`, at most `cfg.max_per_env` per environment (file order);
    ConfigError naming `source` (where the pairs were read) when there are none."""
    kept: list[PreferencePair] = []
    seen: dict[str, int] = {}
    for pair in pairs:
        if pair.split != cfg.split or seen.get(pair.env, 0) == cfg.max_per_env:
            continue
        seen[pair.env] = seen.get(pair.env, 0) + 1
        kept.append(pair)
    if not kept:
        where = f"{source}: " if source else ""
        raise ConfigError(f"{where}no pairs in split {cfg.split!r} (eval.split) among its {len(pairs)} pair(s)")
    return kept


def apply_training_split(pairs: list[PreferencePair], split: dict[str, list[str]] | None) -> list[PreferencePair]:
    """The pairs with the split their model's training run gave them (`reward.task.write_pair_split`):
    a pair it trained on is "train", one it held out "test"; pairs it never saw keep their own."""
    if split is None:
        return pairs
    given = {**dict.fromkeys(split["train"], "train"), **dict.fromkeys(split["test"], "test")}
    return [replace(p, split=given[p.id]) if p.id in given else p for p in pairs]


def check_split(cfg: RewardEvalConfig, training_pairs: bool) -> None:
    """ConfigError for the training split unless `training_pairs` says it is meant."""
    if cfg.split == "train" and not training_pairs:
        raise ConfigError("--split train scores pairs the model may have been trained on; pass "
                          "--score-training-pairs to do that on purpose (the metrics will say so)")


def eval_views(meta: dict[str, Any], cfg: RewardEvalConfig) -> list[str]:
    """The model's training view, then the text-only test's view when asked and different."""
    primary = training_view(meta)
    test = [cfg.text_mode] if cfg.text_only_test and primary == "multimodal" else []
    return [primary, *test]


def evaluate_reward_model(
    model: ModelRef,
    pairs: list[PreferencePair],
    out_dir: str | Path,
    *,
    cfg: RewardEvalConfig,
    data: dict[str, Any],
    resume: bool = False,
    progress: bool = True,
    skipped: SkipLog | None = None,
    training_pairs: bool = False,
) -> RewardEvalMetrics:
    """Score `model` (a reward-model folder) on the test pairs of `pairs` into `out_dir`.

    Args:
        data: what the pairs are (path, format, ...), stored with the settings so a resume
            cannot mix two datasets.
        skipped: the bad records left out while reading `pairs` (written to skipped.jsonl and
            counted in metrics.json).
        training_pairs: allow `cfg.split == "train"` (ConfigError otherwise).
    """
    check_split(cfg, training_pairs)
    require_capability(model, "rm")
    todo_pairs = eval_pairs(apply_training_split(pairs, read_pair_split(model)), cfg,
                            source=str(data.get("path", "")))  # before any work: the data is the input
    out = Path(out_dir)
    settings = {"model": model.name, "data": data, "eval": cfg.model_dump(mode="json")}
    claim(out, settings, command="rm eval", resume=resume)
    backend = cast(RewardBackend, load_backend(model, family="reward"))  # the "reward" family's backend
    views = eval_views(backend.meta, cfg)
    path = out / PAIRS_FILE
    swap_view = views[0] if cfg.swap_check else None

    def scored(todo: list[PreferencePair]) -> Iterator[list[dict[str, Any]]]:
        for row in score_pairs(cast(RewardModel, backend.model), backend.processor, todo, views=views,
                               shared_prefix=cfg.shared_prefix, progress=progress, total=len(todo),
                               swap_view=swap_view):
            if swap_view is not None:
                swap_check([row], swap_view)  # stops at the first pair that fails it
            yield [row]

    # rows are kept across runs (claim_run_folder refuses a finished folder without --resume)
    score_rows(path, todo_pairs, key=lambda p: p.id, row_key=lambda r: r["id"], score=scored, resume=True)
    helpers_stop_here()  # every process of a launch scored its share; the main one summarises
    wanted = {p.id for p in share(todo_pairs)}
    rows = [row for row in read_jsonl(path) if row["id"] in wanted]
    swap = swap_check(rows, swap_view) if swap_view is not None else None
    metrics = summarize_pair_rows(rows, views, views[0], n_boot=cfg.n_boot, swap=swap)
    report = metrics.to_dict()
    if skipped is not None:
        skipped.write(out / SKIPPED_FILE)
        report["skipped_records"] = len(skipped)
    if cfg.split == "train":
        report["training_pairs"] = True
    (out / METRICS_FILE).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return metrics
