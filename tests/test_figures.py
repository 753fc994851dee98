"""Measured tables come from code: the quick demos regenerate docs/quick_figures.md exactly, and
README.md's figure blocks are well formed (`robustvlm.report.figures`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from robustvlm.cli import main
from robustvlm.errors import ConfigError
from robustvlm.report.figures import FIGURES, read_figure, render, update
from robustvlm.report.figures import main as figures_main

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "docs" / "quick_figures.md"


@pytest.fixture(scope="module")
def quick_runs(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("figures")
    runs = {"ladder": folder / "ladder", "ladder-vlm": folder / "ladder",
            **{name: folder / "reward" for name in FIGURES if name.startswith("reward-")}}
    assert main(["demo", "ladder", "--quick", "--out", str(runs["ladder"])]) == 0
    assert main(["demo", "reward", "--quick", "--out", str(runs["reward-linear"])]) == 0
    runs["invariance-spread"] = folder / "invariance"
    runs["invariance"] = runs["invariance-spread"] / "3envs"
    assert main(["demo", "invariance", "--quick", "--out", str(runs["invariance"])]) == 0
    runs["invariance-eiil"] = runs["invariance-spread"] / "2envs"
    assert main(["demo", "invariance", "--quick", "--n-envs", "2", "--methods", "erm,irm,irm_eiil", "--out",
                 str(runs["invariance-eiil"])]) == 0
    return runs


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_quick_figures_in_the_docs_are_what_the_code_produces(name, quick_runs):
    documented = read_figure(QUICK.read_text(encoding="utf-8"), name)
    assert render(name, quick_runs[name]) == documented, (
        f"docs/quick_figures.md's {name} table differs from what the code produces now; if the change "
        "is intended, rewrite it with `python -m robustvlm.report.figures`")


def test_every_figure_has_its_block_in_the_readme():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for name in FIGURES:
        assert read_figure(readme, name).startswith("| ")


def test_update_replaces_only_the_block(tmp_path, capsys):
    doc = tmp_path / "doc.md"
    doc.write_text("before\n<!-- figure:ladder -->\nold\n<!-- /figure:ladder -->\nafter\n")
    update(doc, "ladder", "| new |")
    assert doc.read_text() == "before\n<!-- figure:ladder -->\n| new |\n<!-- /figure:ladder -->\nafter\n"
    with pytest.raises(ConfigError, match="no <!-- figure:reward-linear"):
        update(doc, "reward-linear", "x")
    assert figures_main([str(doc), f"ladder={tmp_path / 'missing'}"]) == 2
    assert "run `robustvlm demo ladder`" in capsys.readouterr().err
