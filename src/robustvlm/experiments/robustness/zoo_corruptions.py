"""The corruption suite of `demo robustness --zoo`: ImageNet-C corruptions of the suite's clean
scans, a 10-way question file per domain, and the domains pooled over corruption types.

    DATA/fashion-test/clean/CLASS/*.png                  the suite's clean scans (the reference)
 -> DATA/fashion-test-corrupted/<corruption>-<severity>/  `data.corrupted_suite`, seed 0: exactly
                                                         what `robustvlm data corrupt
                                                         DATA/fashion-test/clean --out
                                                         DATA/fashion-test-corrupted` writes
 -> questions/<corruption>-<severity>.jsonl              the clean scans' questions (same options
                                                         in the same order), a subset per domain
 -> `mean-<severity>`                                    every type's questions at that severity
                                                         pooled: a member's mean accuracy over types

Every corrupted picture is written (all five severities of every type, for every clean scan), but
a domain is scored on `per_class` questions per class at the headline severity (HEADLINE) and on
`other_per_class` at the other four: a seeded stratified draw per (type, severity), so that the
pooled domain of a severity covers other scans under each type. The lines are fitted on the
headline severity of each type and on the pooled domain of each severity (`fitted_domains`);
every domain's accuracies are in results.csv.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from robustvlm.analysis.accuracy import accuracy_summary
from robustvlm.data.corrupted_suite import CorruptionDomain, write_corrupted_suite
from robustvlm.data.corruptions import COMMON, SEVERITIES, VALIDATION
from robustvlm.data.loaders import load_examples
from robustvlm.multiple_choice.build import MCQuestion, build_questions, write_questions
from robustvlm.runs import read_jsonl

#: The severity whose domains get a line of their own, one per corruption type (the issue's goal).
HEADLINE = 3
SUITE = "fashion-test-corrupted"
#: `data corrupt`'s default seed: the suite is what that command writes.
SEED = 0


def domain(corruption: str, severity: int) -> str:
    """The domain of `corruption` at `severity`, `<corruption>-<severity>` as `data corrupt` names it."""
    return CorruptionDomain(severity, corruption).id


def pooled(severity: int) -> str:
    """The domain of every corruption type's questions at `severity` pooled."""
    return CorruptionDomain(severity).id


def fitted_domains(corruptions: Sequence[str]) -> list[str]:
    """The domains with a line: each type at the headline severity, then each severity pooled."""
    return [domain(c, HEADLINE) for c in corruptions] + [pooled(s) for s in SEVERITIES]


def question_subset(questions: Sequence[MCQuestion], per_class: int, corruption: str, severity: int,
                    seed: int) -> list[MCQuestion]:
    """`per_class` questions of each class (all of a class that has no more), drawn without
    replacement by a generator seeded with (seed, the corruption's index, severity), in their order."""
    rng = np.random.default_rng([seed, (*COMMON, *VALIDATION).index(corruption), severity])
    by_class: dict[str, list[int]] = {}
    for i, q in enumerate(questions):
        by_class.setdefault(q.dataset_class, []).append(i)
    kept = {int(i) for members in by_class.values()
            for i in (members if len(members) <= per_class else rng.choice(members, per_class, replace=False))}
    return [q for i, q in enumerate(questions) if i in kept]


def prepare_corrupted_questions(out: Path, clean: Path, corruptions: Sequence[str], per_class: int,
                                other_per_class: int, *, prompt: str, k: int, seed: int) -> dict[str, Path]:
    """The corrupted suite of the scans in `clean` (CLASS/*.png; resumed) and one question file per
    domain (module doc), `k`-way with `prompt`, options drawn with `seed` as the clean questions'."""
    root = out / "data" / SUITE
    write_corrupted_suite(clean, root, corruptions=corruptions, severities=SEVERITIES, seed=SEED)
    examples = load_examples(root, fmt="folder", instruction_template=prompt, verbose=False)
    benches = {}
    for corruption in corruptions:
        for severity in SEVERITIES:
            name = domain(corruption, severity)
            questions = build_questions([ex for ex in examples if ex.env == name], k=k, distractors="random",
                                        seed=seed, prompt=prompt)
            n = per_class if severity == HEADLINE else other_per_class
            benches[name] = out / "questions" / f"{name}.jsonl"
            write_questions(question_subset(questions, n, corruption, severity, seed), benches[name])
    return benches


def pooled_rows(scores: Mapping[str, Path], corruptions: Sequence[str]) -> dict[str, list[dict]]:
    """{pooled domain: its scored question rows}, from one member's scored domain files `scores`
    ({domain: scores/<model>/<domain>.jsonl})."""
    return {pooled(s): [row for c in corruptions for row in read_jsonl(scores[domain(c, s)])] for s in SEVERITIES}


def pooled_outcomes(outcomes: Mapping[str, np.ndarray], corruptions: Sequence[str]) -> dict[str, np.ndarray]:
    """{pooled domain: one member's 0/1 outcomes of every type at that severity}, from its
    outcomes per domain (`outcomes`), types in `corruptions`' order."""
    return {pooled(s): np.concatenate([outcomes[domain(c, s)] for c in corruptions]) for s in SEVERITIES}


def pooled_results(name: str, group: str, method: str, rows: Mapping[str, Sequence[dict]]) -> list[dict]:
    """results.csv rows of member `name` (its `group` as family) on each pooled domain of `rows`."""
    return [{"model": name, "family": group, "method": method, "bench": bench,
             **accuracy_summary(scored, circular=False).to_dict()} for bench, scored in rows.items()]
