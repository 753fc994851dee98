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
folder, resuming, data-parallel scoring through a `RecordStore`) is `workflows.measure.icl_eval.run_icl`.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from robustvlm.analysis.in_context_accuracy import IclCell, accuracy_cells, icl_summary
from robustvlm.data.images import load_image
from robustvlm.data.records import Example
from robustvlm.errors import ConfigError, DataError
from robustvlm.evaluation.icl_settings import DEFAULTS, POLICIES, InContextSettings
from robustvlm.evaluation.metrics.exact import normalize_answer
from robustvlm.models.backends import Backend
from robustvlm.models.chat import ChatPrompt, encode_chats

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


def sample_queries(examples: Sequence[Example], n_per_env: int, seed: int) -> list[Example]:
    """Up to n_per_env queries per domain (environment), drawn without replacement (domains sorted)."""
    if n_per_env < 1:
        raise ConfigError(f"n_per_env must be positive, got {n_per_env}")
    by_domain: dict[str, list[Example]] = defaultdict(list)
    for ex in examples:
        by_domain[ex.env].append(ex)
    rng = np.random.default_rng([seed, 104729])
    queries = []
    for domain in sorted(by_domain):
        group = by_domain[domain]
        picks = rng.choice(len(group), size=min(n_per_env, len(group)), replace=False)
        queries += [group[i] for i in sorted(picks)]
    return queries


@dataclass(frozen=True)
class IclQuery:
    """One prompt to answer: a query with its demonstrations in one (shots, policy) cell."""

    shots: int
    policy: str
    query: Example
    demos: list[Example]

    @property
    def key(self) -> RecordKey:
        """(shots, policy, query id): the `record_key` of its record."""
        return self.shots, self.policy, self.query.id


Score = Callable[[list[IclQuery]], Iterable[list[dict]]]
#: (every prompt of the run in evaluation order, a scorer of a list of them a batch of records at a
#: time) -> their records in that order; the run's store decides which it scores and where records go
RecordStore = Callable[[list[IclQuery], Score], list[dict]]


def in_memory(items: list[IclQuery], score: Score) -> list[dict]:
    """The `RecordStore` that scores every prompt and keeps the records in memory."""
    return [record for batch in score(items) for record in batch]


def evaluate_icl(
    backend: Backend,
    examples: Sequence[Example],
    settings: InContextSettings = DEFAULTS,
    *,
    store: RecordStore = in_memory,
    predictions: list[dict] | None = None,
    progress: bool = True,
) -> list[IclCell]:
    """Per-domain accuracy of k-shot classification for every (shots, policy) of `settings`.

    Queries are `settings.n_per_env` examples per domain; demos come from the remaining examples.
    Answers are greedy (`settings.max_new_tokens`, `settings.repetition_penalty`), alike for a
    local and a served model, generated `settings.batch_size` prompts at a time within a cell.
    0 shots is evaluated once, under policy "zero-shot". Demo draws are seeded per (seed, policy,
    k, query), so results do not depend on batch size or on which other cells run.

    `store` gets every prompt in evaluation order (cell by cell, queries in order) and a scorer,
    and returns the per-query records {shots, policy, id, domain, target, answer, correct, demos}
    of the prompts of this run (`in_memory`: all of them, scored here; the run folder's store
    reuses finished records and splits the rest between processes: `workflows.measure.icl_eval`).
    A progress bar counts the queries scored.

    Returns one IclCell per (shots, policy, domain) (domain "all" pools the domains), with gain
    and cost (`icl_summary`), from the records `store` returned, which also go to `predictions`
    if given, in evaluation order.
    """
    if any(k > 0 for k in settings.shots):
        backend.check_multi_image()
    queries, pool, plan = _split_queries(examples, settings)
    class_names = sorted({ex.target for ex in examples})
    cells_asked = [(0, ZERO_SHOT)] * (0 in settings.shots) + [
        (k, p) for k in dict.fromkeys(settings.shots) if k > 0 for p in dict.fromkeys(settings.policies)]
    items = [IclQuery(k, policy, q, select_demos(q, pool, k, policy, plan, _demo_rng(settings.seed, policy, k, i))
                      if k else [])
             for k, policy in cells_asked for i, q in enumerate(queries)]

    def score(todo: list[IclQuery]) -> Iterator[list[dict]]:
        with tqdm(total=len(todo), disable=not progress, desc="icl", unit="query") as bar:  # closed before any error
            for records in _generate_records(backend, todo, class_names, settings):
                yield records
                bar.update(len(records))

    records = store(items, score)
    if predictions is not None:
        predictions.extend(records)
    by_cell: dict[tuple[int, str], list[dict]] = defaultdict(list)
    for record in records:
        by_cell[(int(record["shots"]), str(record["policy"]))].append(record)
    return icl_summary([cell for k, policy in cells_asked for cell in accuracy_cells(k, policy, by_cell[(k, policy)])])


def _split_queries(examples: Sequence[Example], settings: InContextSettings) -> tuple[list[Example], list[Example], RunPlan]:
    """(the queries, the demo pool: every other example, the run's plan)."""
    queries = sample_queries(examples, settings.n_per_env, settings.seed)
    query_ids = {q.id for q in queries}
    pool = [ex for ex in examples if ex.id not in query_ids]
    return queries, pool, make_plan(examples, seed=settings.seed, n_skew_classes=settings.n_skew_classes)


def _generate_records(
    backend: Backend, todo: Sequence[IclQuery], class_names: Sequence[str], settings: InContextSettings
) -> Iterator[list[dict]]:
    """The records of the prompts `todo`, a batch at a time: `settings.batch_size` prompts of one
    (shots, policy) cell per generation call."""
    for _, cell in itertools.groupby(todo, key=lambda it: (it.shots, it.policy)):
        pending = list(cell)
        for start in range(0, len(pending), settings.batch_size):
            chunk = pending[start : start + settings.batch_size]
            answers = backend.generate_chats(chat_prompts([(it.query, it.demos) for it in chunk], class_names),
                                             max_new_tokens=settings.max_new_tokens,
                                             repetition_penalty=settings.repetition_penalty)
            yield [_record(it, answer) for it, answer in zip(chunk, answers)]


def record_key(record: Mapping) -> RecordKey:
    """(shots, policy, query id) of a per-query record."""
    return int(record["shots"]), str(record["policy"]), str(record["id"])


def _record(item: IclQuery, answer: str) -> dict:
    query = item.query
    return {"shots": item.shots, "policy": item.policy, "id": query.id, "domain": query.env, "target": query.target,
            "answer": answer, "correct": normalize_answer(answer) == normalize_answer(query.target),
            "demos": [[d.id, d.env, d.target] for d in item.demos]}


def _demo_rng(seed: int, policy: str, k: int, query_index: int) -> np.random.Generator:
    return np.random.default_rng([seed, POLICIES.index(policy), k, query_index])
