"""The demo tables of Getting started and the commands reference are generated from the experiment
registry (issue 50.2): each `<!-- demos:KIND -->...<!-- /demos -->` block holds one row per
registered experiment, rewritten by tools/docs_reference.py (`make generated`), and a block that
differs is stale."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from robustvlm.experiments import EXPERIMENTS

ROOT = Path(__file__).resolve().parents[1]


def test_every_demo_block_is_current(docs_reference):
    pages = {page: page.read_text(encoding="utf-8") for page in docs_reference.DEMO_PAGES}
    kinds = sorted(kind for text in pages.values() for _, kind, _ in docs_reference.DEMO_BLOCK.findall(text))
    assert kinds == ["commands", "table"]
    stale = [str(page.relative_to(ROOT)) for page, text in pages.items() if docs_reference.with_demo_tables(text) != text]
    assert not stale, f"demo tables differ from the experiment registry: run `make generated` ({stale})"


def test_each_row_is_the_registry_entry(docs_reference):
    table = docs_reference.demo_table("commands").splitlines()[2:]
    assert [row.split("`")[1].split()[2] for row in table] == list(EXPERIMENTS)
    invariance = next(row for row in table if row.startswith("| `robustvlm demo invariance "))
    assert "[--budget quick\\|default\\|paper]" in invariance and "`--n-envs` (3)" in invariance
    assert "`--out` (demo_invariance)" in invariance
    tasks = next(row for row in table if row.startswith("| `robustvlm demo tasks "))
    assert "[key=value ...]" in tasks  # the one demo that takes overrides
    assert all("key=value" not in row.split("`")[1] for row in table if row is not tasks)


def test_a_registered_demo_joins_the_tables_and_leaves_the_pages_stale(docs_reference, monkeypatch):
    copy = dataclasses.replace(EXPERIMENTS["invariance"], name="invariance_copy", summary="a copy of the linear tests")
    monkeypatch.setitem(EXPERIMENTS, copy.name, copy)
    assert "| `robustvlm demo invariance_copy [--quick] [--n-envs N]" in docs_reference.demo_table("commands")
    assert "| `robustvlm demo invariance_copy` | a copy of the linear tests |" in docs_reference.demo_table("table")
    page = docs_reference.DEMO_PAGES[0].read_text(encoding="utf-8")
    assert docs_reference.with_demo_tables(page) != page
