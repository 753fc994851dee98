"""The corruption suite's question subsets and the goal over the corruption types, on small
hand-made inputs (the end-to-end checks are in test_robustness_zoo.py)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

import robustvlm
from robustvlm.data.corrupted_suite import CorruptionDomain
from robustvlm.experiments.robustness.zoo_corruptions import fitted_domains, question_subset
from robustvlm.experiments.robustness.zoo_report import ZooRobustnessResults
from robustvlm.multiple_choice.build import MCQuestion


def _questions(classes: int, per_class: int) -> list[MCQuestion]:
    return [MCQuestion(id=f"c{c}/{i}", image=f"c{c}/{i}.png", question="q", options=["a", "b"], answer=0,
                       source="d", dataset_class=f"c{c}", prompt="q")
            for c in range(classes) for i in range(per_class)]


def test_a_subset_keeps_per_class_questions_of_each_class_in_order_seeded_by_type_and_severity():
    questions = _questions(10, 5)
    kept = question_subset(questions, 2, "gaussian_noise", 1, seed=0)
    assert [sum(q.dataset_class == f"c{c}" for q in kept) for c in range(10)] == [2] * 10
    assert [questions.index(q) for q in kept] == sorted(questions.index(q) for q in kept)
    assert kept == question_subset(questions, 2, "gaussian_noise", 1, seed=0)
    others = [question_subset(questions, 2, c, s, seed=0) for c, s in (("fog", 1), ("gaussian_noise", 2))]
    assert all(o != kept for o in others)  # other scans under another type or severity
    assert question_subset(questions, 5, "fog", 3, seed=0) == questions  # a class with no more keeps all


def test_the_fitted_domains_are_each_type_at_severity_3_then_each_severity_pooled():
    assert fitted_domains(["fog", "contrast"]) == ["fog-3", "contrast-3", "mean-1", "mean-2", "mean-3", "mean-4",
                                                   "mean-5"]


def _results(original: dict[str, float], corruptions: dict[str, float], members: int) -> ZooRobustnessResults:
    def shift(r2: float) -> SimpleNamespace:
        return SimpleNamespace(all_members=SimpleNamespace(fit=SimpleNamespace(r2=r2)))
    return ZooRobustnessResults(
        quick=False, seconds=0.0, suite="s", reference="clean", k_options=10, n_questions=200,
        members=[SimpleNamespace()] * members, results_csv="", shifts={s: shift(v) for s, v in original.items()},
        task_signal_model="", task_signal={}, corruptions={d: shift(v) for d, v in corruptions.items()},
    )  # type: ignore[arg-type]


def test_the_corruption_goal_needs_two_original_shifts_and_most_types_over_twelve_members():
    original = {"rotated": 0.95, "coloured": 0.91, "inverted": 0.2, "noisy": 0.99}
    types = {"fog-3": 0.95, "snow-3": 0.92, "frost-3": 0.5, "mean-3": 0.1}  # pooled domains do not count
    assert _results(original, types, 12).corruption_goal() == (True, ["rotated", "coloured"], ["fog-3", "snow-3"])
    assert not _results(original, types, 11).corruption_goal()[0]
    assert not _results(original, {**types, "pixelate-3": 0.3}, 12).corruption_goal()[0]  # 2 of 4: not most
    assert not _results({**original, "coloured": 0.89}, types, 12).corruption_goal()[0]


def test_a_corruption_domain_id_is_the_domain_it_names():
    assert CorruptionDomain(3, "fog").id == "fog-3" and CorruptionDomain(2).id == "mean-2"
    for domain in (CorruptionDomain(1, "gaussian_noise"), CorruptionDomain(5, "jpeg_compression"), CorruptionDomain(4)):
        assert CorruptionDomain.parse(domain.id) == domain
    assert CorruptionDomain.parse("mean-3").pooled and not CorruptionDomain.parse("fog-3").pooled
    for bad in ("fog", "fog-", "-3", "fog-x"):
        with pytest.raises(ValueError, match=re.escape(repr(bad))):
            CorruptionDomain.parse(bad)


def test_no_module_reads_a_corruption_domain_by_its_text_but_its_type():
    package = Path(robustvlm.__file__).parent
    parsing = re.compile(r"""startswith\(\s*POOLED|\b(domain|types?)\w*(\[\d+\])?\.r?(split|partition)\(\s*["']-["']""")
    assert parsing.search('types = [d for d in x if not d.startswith(POOLED)]')
    assert parsing.search("corruption, severity = domain.rsplit(\"-\", 1)")
    assert parsing.search("f\"types at severity {types[0].rsplit('-', 1)[1]}\"")
    assert not parsing.search('ways = int(key.split("-")[0])')
    found = [f"{p.relative_to(package)}: {line.strip()}" for p in sorted(package.rglob("*.py"))
             if p != package / "data" / "corrupted_suite.py"
             for line in p.read_text(encoding="utf-8").splitlines() if parsing.search(line)]
    assert found == []
