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

Accuracy is exact match of the generated answer against the class name, both normalised as the
exact-match metric does (`evaluation.metrics.exact`). The run itself (model loading, the output
folder, resuming) is `workflows.measure.icl_eval.run_icl`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from robustvlm.analysis.in_context_accuracy import IclCell, accuracy_cells, icl_summary
from robustvlm.data.images import load_image
from robustvlm.data.records import Example
from robustvlm.errors import ConfigError, DataError
from robustvlm.evaluation.metrics.exact import normalize_answer
from robustvlm.models.backends import Backend
from robustvlm.models.chat import ChatPrompt, encode_chats

POLICIES = ("random", "same-domain", "cross-domain", "label-shift", "spurious")
ZERO_SHOT = "zero-shot"  # the policy name of 0-shot rows (no demos, so no policy applies)
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


def chat_prompts(
    items: Sequence[tuple[Example, Sequence[Example]]],
    class_names: Sequence[str],
    *,
    image_loader: Callable[..., Any] = load_image,
) -> list[ChatPrompt]:
    """One chat prompt per (query, demos) pair: len(demos) + 1 images, the query's last."""
    return [
        ChatPrompt(build_messages(query, demos, class_names),
                   [image_loader(ex.image, source=ex.source, record=ex.id) for ex in [*demos, query]],
                   record=query.id)
        for query, demos in items
    ]


def encode_prompts(
    processor: Any,
    items: Sequence[tuple[Example, Sequence[Example]]],
    class_names: Sequence[str],
    *,
    image_loader: Callable[..., Any] = load_image,
) -> dict[str, Any]:
    """Left-padded generation batch for (query, demos) pairs, as a local model receives them."""
    return encode_chats(processor, chat_prompts(items, class_names, image_loader=image_loader))


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
    backend: Backend,
    examples: Sequence[Example],
    *,
    shots: Sequence[int] = (0, 1, 2, 4),
    policies: Sequence[str] = POLICIES,
    n_per_domain: int = 20,
    seed: int = 0,
    n_skew_classes: int = 2,
    batch_size: int = 8,
    max_new_tokens: int = 8,
    repetition_penalty: float = 1.0,
    predictions: list[dict] | None = None,
    finished: Mapping[RecordKey, Mapping] | None = None,
    on_records: Callable[[list[dict]], None] | None = None,
    progress: bool = True,
) -> list[IclCell]:
    """Per-domain accuracy of k-shot classification for every (shots, policy).

    Queries are `n_per_domain` examples per domain; demos come from the remaining examples.
    Answers are greedy, at most `max_new_tokens` tokens, with `repetition_penalty` (1.0: none),
    alike for a local and a served model. 0 shots is evaluated once, under policy "zero-shot". Demo draws are seeded per
    (seed, policy, k, query), so results do not depend on batch size or on which other cells run.

    Per-query records {shots, policy, id, domain, target, answer, correct, demos} already in
    `finished` (keyed by `record_key`) are reused, not recomputed; each batch of new records is
    passed to `on_records` as soon as it is generated. A progress bar counts queries.

    Returns one IclCell per (shots, policy, domain) (domain "all" pools the domains), with gain
    and cost (`icl_summary`). All per-query records, finished and new, go to `predictions` if
    given, in evaluation order.
    """
    _check_settings(shots, policies, batch_size)
    if any(k > 0 for k in shots):
        backend.check_multi_image()
    finished = finished or {}
    queries, pool, plan = _split_queries(examples, n_per_domain, seed, n_skew_classes)
    class_names = sorted({ex.target for ex in examples})
    settings = [(0, ZERO_SHOT)] * (0 in shots) + [(k, p) for k in shots if k > 0 for p in policies]
    n_done = sum((k, p, q.id) in finished for k, p in settings for q in queries)
    bar = tqdm(total=len(settings) * len(queries), initial=n_done, disable=not progress, desc="icl", unit="query")
    decoding = {"max_new_tokens": max_new_tokens, "repetition_penalty": repetition_penalty}
    cells: list[IclCell] = []
    try:
        for k, policy in settings:
            items = [
                (q, select_demos(q, pool, k, policy, plan, _demo_rng(seed, policy, k, i)) if k else [])
                for i, q in enumerate(queries)
            ]
            pending = [(q, demos) for q, demos in items if (k, policy, q.id) not in finished]
            new = _generate_records(backend, pending, k, policy, class_names, batch_size=batch_size, decoding=decoding,
                                    on_records=on_records, bar=bar)
            records = [dict(finished.get((k, policy, q.id)) or new[(k, policy, q.id)]) for q in queries]
            if predictions is not None:
                predictions.extend(records)
            cells += accuracy_cells(k, policy, records)
    finally:
        bar.close()  # before any error line
    return icl_summary(cells)


def _split_queries(
    examples: Sequence[Example], n_per_domain: int, seed: int, n_skew_classes: int
) -> tuple[list[Example], list[Example], RunPlan]:
    """(the queries, the demo pool: every other example, the run's plan)."""
    queries = sample_queries(examples, n_per_domain, seed)
    query_ids = {q.id for q in queries}
    pool = [ex for ex in examples if ex.id not in query_ids]
    return queries, pool, make_plan(examples, seed=seed, n_skew_classes=n_skew_classes)


def _generate_records(
    backend: Backend, pending: Sequence[tuple[Example, Sequence[Example]]], k: int, policy: str,
    class_names: Sequence[str], *, batch_size: int, decoding: Mapping[str, Any],
    on_records: Callable[[list[dict]], None] | None, bar: Any,
) -> dict[RecordKey, dict]:
    """The per-query records of the (query, demos) pairs `pending`, generated in batches; each
    batch's records go to `on_records` as soon as they exist and advance the progress `bar`."""
    new: dict[RecordKey, dict] = {}
    for start in range(0, len(pending), batch_size):
        chunk = pending[start : start + batch_size]
        answers = backend.generate_chats(chat_prompts(chunk, class_names), **decoding)
        records = [_record(k, policy, q, demos, a) for (q, demos), a in zip(chunk, answers)]
        if on_records is not None:
            on_records(records)
        new.update((record_key(r), r) for r in records)
        bar.update(len(chunk))
    return new


def record_key(record: Mapping) -> RecordKey:
    """(shots, policy, query id) of a per-query record."""
    return int(record["shots"]), str(record["policy"]), str(record["id"])


def _record(k: int, policy: str, query: Example, demos: Sequence[Example], answer: str) -> dict:
    return {"shots": k, "policy": policy, "id": query.id, "domain": query.env, "target": query.target,
            "answer": answer, "correct": normalize_answer(answer) == normalize_answer(query.target),
            "demos": [[d.id, d.env, d.target] for d in demos]}


def _check_settings(shots: Sequence[int], policies: Sequence[str], batch_size: int) -> None:
    if not shots or any(isinstance(k, bool) or not isinstance(k, int) or k < 0 for k in shots):
        raise ConfigError(f"shots must be non-negative integers, got {list(shots)}")
    unknown = [p for p in policies if p not in POLICIES]
    if unknown or (not policies and any(k > 0 for k in shots)):
        raise ConfigError(f"unknown or missing demo policies {unknown}; choose from {', '.join(POLICIES)}")
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")


def _demo_rng(seed: int, policy: str, k: int, query_index: int) -> np.random.Generator:
    return np.random.default_rng([seed, POLICIES.index(policy), k, query_index])
