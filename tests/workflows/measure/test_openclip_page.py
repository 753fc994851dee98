"""The results page "Accuracy on the line on 121 open CLIP models" is current with the code: its
tables are what `make figures-openclip` makes from the shipped table now, and its images exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from robustvlm.figures.write import render
from robustvlm.report.figure_blocks import read_figure
from tests.helpers.bad_input import run_cli

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "results" / "openclip.md"


def _makefile_shifts() -> list[tuple[str, str]]:
    """The (folder, shift) pairs `make figures-openclip` fits."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    block = text[text.index("figures-openclip:"):]
    return re.findall(r'"(\d-[\w-]+):([^"]+)"', block.split("done", 1)[0])


@pytest.mark.slow
def test_the_page_tables_are_what_the_code_makes_from_the_shipped_table(tmp_path):
    shifts = _makefile_shifts()
    assert [s for _, s in shifts] == ["ImageNet v2", "ImageNet Sketch", "ImageNet-R", "ImageNet-A", "ObjectNet",
                                      "Camelyon17"]
    for folder, shift in shifts:
        argv = ["robustness", "fit", str(ROOT / "docs" / "data" / "openclip_results.csv"), "--ref", "ImageNet 1k",
                "--shift", shift, "--group-by", "source", "--out", str(tmp_path / folder)]
        assert run_cli(argv) == 0
    text = PAGE.read_text(encoding="utf-8")
    for name in ("openclip-lines", "openclip-er"):
        assert render(name, tmp_path) == read_figure(text, name), (
            f"docs/results/openclip.md's {name} table differs from the code's: run `make figures-openclip`")


def test_the_page_shows_an_image_per_shift():
    text = PAGE.read_text(encoding="utf-8")
    for folder, _ in _makefile_shifts():
        image = f"../images/openclip/{folder.split('-', 1)[1]}.png"
        assert image in text and (PAGE.parent / image).is_file()
