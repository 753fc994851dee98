"""In-context (k-shot) classification across domains: demo selection, prompts, evaluation loop.

A k-shot prompt is a conversation: k demonstration turn pairs (user: image + question,
assistant: the demo's class name), then the query's user turn and the generation prompt, so
the processor receives k + 1 images in order. Demo policies (all seeded, the query itself and
every other query never used as a demo):

    random        any demo from the pool, any domain
    same-domain   demos from the query's domain only
    cross-domain  demos from the other domains only
    label-shift   demos from a few classes only (`skew_classes` drawn once per run)
    spurious      demos whose domain predicts their label: each domain is tied to one class
                  (drawn once per run) and only examples with target == class(domain) serve

Accuracy is exact match of the generated answer against the class name after normalisation
(lower case, punctuation and surrounding articles removed).

`run_icl` writes in its output folder: config.resolved.yaml (the run's settings),
icl_predictions.jsonl (one line per (shots, policy, query), appended and flushed as each batch
finishes, put in evaluation order at the end), icl_results.json and icl_results.md. With
`resume=True` it keeps the finished lines (a torn last line from a killed run is dropped),
evaluates only the missing queries, and refuses a folder whose saved settings differ.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch
import yaml
from PIL import Image
from tqdm.auto import tqdm

from robustvlm.data.images import load_image
from robustvlm.data.records import Example
from robustvlm.errors import ConfigError, DataError
from robustvlm.evaluation.metrics.exact import normalize_answer
from robustvlm.jsonl import read_appended_rows
from robustvlm.models.backends import load_backend
from robustvlm.models.generate import generate_batch
from robustvlm.report.tables import fmt, markdown_table

POLICIES = ("random", "same-domain", "cross-domain", "label-shift", "spurious")
ZERO_SHOT = "zero-shot"  # the policy name of 0-shot rows (no demos, so no policy applies)
ALL_DOMAINS = "all"
CONFIG_FILE = "config.resolved.yaml"
PREDICTIONS_FILE = "icl_predictions.jsonl"
RecordKey = tuple[int, str, str]  # (shots, policy, query id): one per-query record


@dataclass(frozen=True)
class RunPlan:
    """Run-level choices of the shifted policies, drawn once from the seed.

    Attributes:
        skew_classes: the classes `label-shift` demos come from.
        spurious_label: domain -> the class its `spurious` demos carry.
    """

    skew_classes: tuple[str, ...]
    spurious_label: dict[str, str]


def make_plan(examples: Sequence[Example], *, seed: int = 0, n_skew_classes: int = 2) -> RunPlan:
    """Draw the label-shift classes and the spurious domain -> class ties.

    Domains get distinct classes while there are enough classes (then classes repeat).
    """
    classes = sorted({ex.target for ex in examples})
    domains = sorted({ex.env for ex in examples})
    if not 1 <= n_skew_classes <= len(classes):
        raise ConfigError(f"n_skew_classes must lie in [1, {len(classes)}], got {n_skew_classes}")
    rng = np.random.default_rng([seed, 7919])
    skew = tuple(sorted(rng.choice(classes, size=n_skew_classes, replace=False).tolist()))
    order = rng.permutation(len(classes)).tolist()
    tied = {d: classes[order[i % len(classes)]] for i, d in enumerate(domains)}
    return RunPlan(skew, tied)


def candidate_demos(query: Example, pool: Sequence[Example], policy: str, plan: RunPlan) -> list[Example]:
    """The pool examples `policy` allows as demos for `query` (the query itself excluded)."""
    rules: dict[str, Callable[[Example], bool]] = {
        "random": lambda ex: True,
        "same-domain": lambda ex: ex.env == query.env,
        "cross-domain": lambda ex: ex.env != query.env,
        "label-shift": lambda ex: ex.target in plan.skew_classes,
        "spurious": lambda ex: plan.spurious_label.get(ex.env) == ex.target,
    }
    if policy not in rules:
        raise ConfigError(f"unknown demo policy {policy!r}; choose from {', '.join(POLICIES)}")
    return [ex for ex in pool if ex.id != query.id and rules[policy](ex)]


def select_demos(
    query: Example, pool: Sequence[Example], k: int, policy: str, plan: RunPlan, rng: np.random.Generator
) -> list[Example]:
    """k distinct demos drawn uniformly (without replacement, random order) from the allowed ones.

    Raises DataError when the policy leaves fewer than k candidates.
    """
    allowed = candidate_demos(query, pool, policy, plan)
    if len(allowed) < k:
        raise DataError(
            f"policy {policy!r} leaves {len(allowed)} demo candidates for query {query.id!r} "
            f"(domain {query.env!r}), fewer than k={k}; use more data or fewer shots",
            query.source,
            query.id,
        )
    return [allowed[i] for i in rng.choice(len(allowed), size=k, replace=False)]


def question(ex: Example, class_names: Sequence[str]) -> str:
    """The user text of a classification turn: the instruction and the allowed answers."""
    return f"{ex.instruction} Answer with one of: {', '.join(class_names)}."


def build_messages(query: Example, demos: Sequence[Example], class_names: Sequence[str]) -> list[dict]:
    """Chat messages: one user/assistant pair per demo, then the query's user turn."""
    messages: list[dict] = []
    for ex in [*demos, query]:
        messages.append({"role": "user", "content": [
            {"type": "image"}, {"type": "text", "text": question(ex, class_names)}
        ]})
        if ex is not query:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": ex.target}]})
    return messages


def encode_prompts(
    processor: Any,
    items: Sequence[tuple[Example, Sequence[Example]]],
    class_names: Sequence[str],
    *,
    image_loader: Callable[..., Any] = load_image,
) -> dict[str, Any]:
    """Left-padded generation batch for (query, demos) pairs; row i gets len(demos_i) + 1 images."""
    texts, images = [], []
    for query, demos in items:
        messages = build_messages(query, demos, class_names)
        texts.append(processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))
        images.append([image_loader(ex.image, source=ex.source, record=ex.id) for ex in [*demos, query]])
    return processor(text=texts, images=images, padding=True, padding_side="left", return_tensors="pt")


def check_multi_image(processor: Any) -> None:
    """Raise ConfigError unless the processor expands two images in one prompt into two images.

    Compares prompt lengths with 0, 1 and 2 image entries: each image must add the same
    positive number of tokens.
    """
    blank = Image.new("RGB", (32, 32))
    lengths = []
    for n in range(3):
        content = [{"type": "image"}] * n + [{"type": "text", "text": "x"}]
        text = processor.apply_chat_template(
            [{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False
        )
        try:
            enc = processor(text=[text], images=[[blank] * n] if n else None, return_tensors="pt")
        except (ValueError, TypeError, RuntimeError) as exc:
            raise ConfigError(
                f"{type(processor).__name__} cannot take {n} images in one prompt ({exc}); "
                "in-context evaluation needs a model that accepts several images"
            ) from exc
        lengths.append(enc["input_ids"].shape[1])
    per_image = lengths[1] - lengths[0]
    if per_image <= 0 or lengths[2] - lengths[1] != per_image:
        raise ConfigError(
            f"{type(processor).__name__} does not expand several images in one prompt (prompt "
            f"lengths with 0/1/2 images: {lengths}); in-context evaluation needs a multi-image model"
        )


def sample_queries(examples: Sequence[Example], n_per_domain: int, seed: int) -> list[Example]:
    """Up to n_per_domain queries per domain, drawn without replacement (domains sorted)."""
    if n_per_domain < 1:
        raise ConfigError(f"n_per_domain must be positive, got {n_per_domain}")
    by_domain: dict[str, list[Example]] = defaultdict(list)
    for ex in examples:
        by_domain[ex.env].append(ex)
    rng = np.random.default_rng([seed, 104729])
    queries = []
    for domain in sorted(by_domain):
        group = by_domain[domain]
        picks = rng.choice(len(group), size=min(n_per_domain, len(group)), replace=False)
        queries += [group[i] for i in sorted(picks)]
    return queries


def evaluate_icl(
    model: torch.nn.Module,
    processor: Any,
    examples: Sequence[Example],
    *,
    shots: Sequence[int] = (0, 1, 2, 4),
    policies: Sequence[str] = POLICIES,
    n_per_domain: int = 20,
    seed: int = 0,
    n_skew_classes: int = 2,
    batch_size: int = 8,
    max_new_tokens: int = 8,
    predictions: list[dict] | None = None,
    finished: Mapping[RecordKey, Mapping] | None = None,
    on_records: Callable[[list[dict]], None] | None = None,
    progress: bool = True,
) -> list[dict]:
    """Per-domain accuracy of k-shot classification for every (shots, policy).

    Queries are `n_per_domain` examples per domain; demos come from the remaining examples.
    0 shots is evaluated once, under policy "zero-shot". Demo draws are seeded per
    (seed, policy, k, query), so results do not depend on batch size or on which other cells run.

    Per-query records {shots, policy, id, domain, target, answer, correct, demos} already in
    `finished` (keyed by `record_key`) are reused, not recomputed; each batch of new records is
    passed to `on_records` as soon as it is generated. A progress bar counts queries.

    Returns rows {shots, policy, domain, n, correct, accuracy} (domain "all" pools the domains),
    completed by `icl_summary` with gain and cost. All per-query records, finished and new, go
    to `predictions` if given, in evaluation order.
    """
    _check_shots_policies(shots, policies)
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    if any(k > 0 for k in shots):
        check_multi_image(processor)
    finished = finished or {}
    class_names = sorted({ex.target for ex in examples})
    queries = sample_queries(examples, n_per_domain, seed)
    query_ids = {q.id for q in queries}
    pool = [ex for ex in examples if ex.id not in query_ids]
    plan = make_plan(examples, seed=seed, n_skew_classes=n_skew_classes)
    cells = [(0, ZERO_SHOT)] if 0 in shots else []
    cells += [(k, p) for k in shots if k > 0 for p in policies]
    n_done = sum((k, p, q.id) in finished for k, p in cells for q in queries)
    bar = tqdm(total=len(cells) * len(queries), initial=n_done, disable=not progress, desc="icl", unit="query")
    rows: list[dict] = []
    model.eval()
    for k, policy in cells:
        items = [
            (q, select_demos(q, pool, k, policy, plan, _demo_rng(seed, policy, k, i)) if k else [])
            for i, q in enumerate(queries)
        ]
        pending = [(q, demos) for q, demos in items if (k, policy, q.id) not in finished]
        new: dict[RecordKey, dict] = {}
        for start in range(0, len(pending), batch_size):
            chunk = pending[start : start + batch_size]
            batch = encode_prompts(processor, chunk, class_names)
            answers = generate_batch(model, processor, batch, max_new_tokens=max_new_tokens)
            records = [_record(k, policy, q, demos, a) for (q, demos), a in zip(chunk, answers)]
            if on_records is not None:
                on_records(records)
            new.update((record_key(r), r) for r in records)
            bar.update(len(chunk))
        records = [dict(finished.get((k, policy, q.id)) or new[(k, policy, q.id)]) for q in queries]
        if predictions is not None:
            predictions.extend(records)
        rows += _accuracy_rows(k, policy, records)
    bar.close()
    return icl_summary(rows)


def record_key(record: Mapping) -> RecordKey:
    """(shots, policy, query id) of a per-query record."""
    return int(record["shots"]), str(record["policy"]), str(record["id"])


def _record(k: int, policy: str, query: Example, demos: Sequence[Example], answer: str) -> dict:
    return {"shots": k, "policy": policy, "id": query.id, "domain": query.env, "target": query.target,
            "answer": answer, "correct": normalize_answer(answer) == normalize_answer(query.target),
            "demos": [[d.id, d.env, d.target] for d in demos]}


def _check_shots_policies(shots: Sequence[int], policies: Sequence[str]) -> None:
    if not shots or any(isinstance(k, bool) or not isinstance(k, int) or k < 0 for k in shots):
        raise ConfigError(f"shots must be non-negative integers, got {list(shots)}")
    unknown = [p for p in policies if p not in POLICIES]
    if unknown or (not policies and any(k > 0 for k in shots)):
        raise ConfigError(f"unknown or missing demo policies {unknown}; choose from {', '.join(POLICIES)}")


def _demo_rng(seed: int, policy: str, k: int, query_index: int) -> np.random.Generator:
    return np.random.default_rng([seed, POLICIES.index(policy), k, query_index])


def _accuracy_rows(k: int, policy: str, records: list[dict]) -> list[dict]:
    groups: dict[str, list[bool]] = defaultdict(list)
    for r in records:
        groups[r["domain"]].append(r["correct"])
        groups[ALL_DOMAINS].append(r["correct"])
    return [
        {"shots": k, "policy": policy, "domain": d, "n": len(c), "correct": int(sum(c)),
         "accuracy": sum(c) / len(c)}
        for d, c in sorted(groups.items())
    ]


def icl_summary(rows: Sequence[Mapping]) -> list[dict]:
    """Add to each row `gain` (accuracy minus the domain's 0-shot accuracy) and `cost`
    (accuracy of `random` demos at the same shots minus this row's accuracy: positive when the
    shifted policy hurts). A value is None when its reference row is missing (and for 0 shots)."""
    zero = {r["domain"]: r["accuracy"] for r in rows if r["shots"] == 0}
    rand = {(r["shots"], r["domain"]): r["accuracy"] for r in rows if r["policy"] == "random"}
    out = []
    for r in rows:
        k, d, acc = r["shots"], r["domain"], r["accuracy"]
        gain = acc - zero[d] if k > 0 and d in zero else None
        cost = rand[(k, d)] - acc if k > 0 and (k, d) in rand else None
        out.append({**r, "gain": gain, "cost": cost})
    return out


def icl_markdown(rows: Sequence[Mapping]) -> str:
    """Markdown table: one line per (shots, policy, domain) with accuracy, gain and cost."""
    body = [
        [str(r["shots"]), r["policy"], r["domain"], str(r["n"]), fmt(r["accuracy"]),
         fmt(r["gain"]), fmt(r["cost"])]
        for r in rows
    ]
    return markdown_table(["shots", "policy", "domain", "n", "accuracy", "gain vs 0-shot",
                           "cost vs random"], body)


def write_icl_results(out_dir: str | Path, rows: Sequence[Mapping], config: Mapping,
                      predictions: Sequence[Mapping] = ()) -> Path:
    """Write icl_results.json ({config, rows}), icl_results.md and icl_predictions.jsonl (replaced
    atomically, so a kill while writing leaves the earlier file whole)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "icl_results.json"
    path.write_text(json.dumps({"config": dict(config), "rows": list(rows)}, indent=2), encoding="utf-8")
    (out / "icl_results.md").write_text(
        f"# In-context evaluation\n\nmodel: `{config.get('model')}`\n\n{icl_markdown(rows)}\n",
        encoding="utf-8",
    )
    tmp = out / f"{PREDICTIONS_FILE}.tmp"
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in predictions), encoding="utf-8")
    tmp.replace(out / PREDICTIONS_FILE)
    return path


def check_saved_config(out_dir: Path, config: Mapping, *, resume: bool) -> None:
    """Save `config` as `out_dir`/config.resolved.yaml. On resume, first raise ConfigError if the
    saved config differs, or if predictions are there without a saved config."""
    path, log = out_dir / CONFIG_FILE, out_dir / PREDICTIONS_FILE
    if resume and path.is_file():
        saved = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        differ = sorted(key for key in {*saved, *config} if saved.get(key) != config.get(key))
        if differ:
            raise ConfigError(
                f"cannot resume into {out_dir}: its {CONFIG_FILE} differs in {differ} "
                f"(saved {[saved.get(k) for k in differ]}, now {[config.get(k) for k in differ]}); "
                "use the same settings or another --out"
            )
    elif resume and log.is_file():
        raise ConfigError(f"cannot resume into {out_dir}: {log.name} is there but {CONFIG_FILE} is not, "
                          "so its settings are unknown; use another --out")
    out_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(dict(config), sort_keys=False), encoding="utf-8")


def _append_records(log: IO[str], records: list[dict]) -> None:
    for r in records:
        log.write(json.dumps(r, ensure_ascii=False) + "\n")
    log.flush()


def task_corpus(examples: Sequence[Example]) -> list[str]:
    """The instructions and targets of `examples`: what a "tiny:" model's tokenizer is trained on."""
    return sorted({ex.instruction for ex in examples} | {ex.target for ex in examples})


def run_icl(
    model_name: str,
    data_root: str | Path,
    out_dir: str | Path,
    *,
    shots: Sequence[int] = (0, 1, 2, 4),
    policies: Sequence[str] = POLICIES,
    n_per_domain: int = 20,
    seed: int = 0,
    batch_size: int = 8,
    resume: bool = False,
    progress: bool = True,
) -> dict:
    """Load the model and an image-folder domain dataset (ROOT/DOMAIN/CLASS/*.png), run
    `evaluate_icl` and write its outputs under `out_dir` (see the module docstring).

    With `resume`, finished per-query lines of icl_predictions.jsonl are kept and not recomputed;
    a folder written with other settings (batch_size aside) is refused with ConfigError.
    Returns {"config": ..., "rows": ...} as written to icl_results.json.
    """
    from robustvlm.data.loaders import load_examples

    out = Path(out_dir)
    config = {"model": model_name, "data": str(data_root), "shots": list(shots),
              "policies": list(policies), "n_per_domain": n_per_domain, "seed": seed}
    check_saved_config(out, config, resume=resume)
    log_path = out / PREDICTIONS_FILE
    finished = {record_key(r): r for r in read_appended_rows(log_path)} if resume else {}
    examples = load_examples(data_root, fmt="folder", verbose=False)
    if not examples:
        raise DataError("no images found (expected ROOT/DOMAIN/CLASS/*.png)", str(data_root))
    backend = load_backend(model_name, corpus=task_corpus(examples))
    backend.require("generate")
    predictions: list[dict] = []
    with log_path.open("a" if resume else "w", encoding="utf-8") as log:
        rows = evaluate_icl(backend.model, backend.processor, examples, shots=shots, policies=policies,
                            n_per_domain=n_per_domain, seed=seed, batch_size=batch_size,
                            predictions=predictions, finished=finished,
                            on_records=lambda records: _append_records(log, records), progress=progress)
    write_icl_results(out, rows, config, predictions)
    return {"config": config, "rows": rows}
