"""Method lists in README and docs are generated from the objective registry (issue 50.3): each
`<!-- methods:EXPERIMENT -->...<!-- /methods -->` block holds the registered objectives' labels,
rewritten by tools/docs_reference.py (`make generated`), and a block that differs is stale."""

from __future__ import annotations

from pathlib import Path

import pytest

from robustvlm.objectives import REGISTRY
from robustvlm.objectives.vrex import VREx

ROOT = Path(__file__).resolve().parents[1]


def test_every_method_block_is_current(docs_reference):
    pages = {page: page.read_text(encoding="utf-8") for page in docs_reference.METHOD_PAGES}
    blocks = sum(len(docs_reference.METHOD_BLOCK.findall(text)) for text in pages.values())
    assert blocks >= 7  # README, index, the guide, Getting started and its demo page
    stale = [str(page.relative_to(ROOT)) for page, text in pages.items() if docs_reference.with_method_lists(text) != text]
    assert not stale, f"method lists differ from the registry: run `make generated` ({stale})"


def test_a_block_is_rewritten_from_the_registry(docs_reference):
    text = "with <!-- methods:all:or -->ERM<!-- /methods -->; the ladder: <!-- methods:ladder:list -->x<!-- /methods -->."
    assert docs_reference.with_method_lists(text) == (
        "with <!-- methods:all:or -->ERM, IRMv1, V-REx, GroupDRO, BIRM or Dynamic BIRM<!-- /methods -->; the ladder: "
        "<!-- methods:ladder:list -->ERM, IRMv1, V-REx, BIRM, Dynamic BIRM<!-- /methods -->.")
    assert docs_reference.method_list("tasks") == "ERM, BIRM and Dynamic BIRM"


def test_a_registered_objective_joins_the_lists_and_leaves_the_pages_stale(docs_reference, monkeypatch):
    class VRExCopy(VREx):
        name = "vrex_copy"
        label = "V-REx copy"

    monkeypatch.setitem(REGISTRY, VRExCopy.name, VRExCopy)
    assert docs_reference.method_list("all") == "ERM, IRMv1, V-REx, GroupDRO, BIRM, Dynamic BIRM and V-REx copy"
    assert "V-REx copy" in docs_reference.method_list("ladder")  # VREx applies to the ladder, so does its copy
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert docs_reference.with_method_lists(readme) != readme


def test_a_block_naming_no_experiment_stops_the_rewrite(docs_reference):
    with pytest.raises(SystemExit, match="no registered objective applies to 'nothing'"):
        docs_reference.with_method_lists("<!-- methods:nothing -->x<!-- /methods -->")
