"""The Results pages show their pictures: every page with a figure block shows at least one
(or is allowed not to, with the reason), every figure block with a picture (`IMAGES`) is followed by
its image unless `NOT_DRAWN` says why it is not drawn yet, and every image a docs page shows
exists in docs/images (no broken picture on the site)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from robustvlm.figures.images import IMAGES, image_name

pytestmark = pytest.mark.docs

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RESULTS = DOCS / "results"
#: Results pages with figure blocks that show no picture, and why.
NO_PICTURE: dict[str, str] = {}
_OLD_RUN = ("its table comes from a run made before the pages had pictures and the run was not repeated "
            "(the results folder is not kept); `make figures {}` draws it with the table")
#: Figure blocks with a picture function whose picture is not drawn yet, and why (the page shows
#: no link to it until it is drawn: then the entry goes).
NOT_DRAWN: dict[str, str] = {
    "ladder": _OLD_RUN.format("ladder") + " (about 30 min on 2 cores)",
    "ladder-zoo": _OLD_RUN.format("ladder-zoo") + " (its re-run on the rebuilt member is `ladder-zoo:rebuilt`)",
    "ladder-zoo:head-lora": _OLD_RUN.format("ladder-zoo") + " (about 10 min on 2 cores)",
    "ladder-zoo:llava": _OLD_RUN.format("ladder-zoo") + " (about 5 min on 2 cores)",
    "reward-zoo-matrix": _OLD_RUN.format("reward-zoo") + " (about an hour on 2 cores)",
    "zoo-tasks": _OLD_RUN.format("zoo-tasks") + " (its re-run on the rebuilt member is `zoo-tasks:rebuilt`)",
    "zoo-tasks-envs": _OLD_RUN.format("zoo-tasks") + " (its re-run on the rebuilt member is `zoo-tasks-envs:rebuilt`)",
    "icl-defined-labels:llava-clip-m": _OLD_RUN.format("icl") + " (about 3 CPU-minutes)",
    "icl-defined-labels:llava-clip-m-icl": _OLD_RUN.format("icl") + " (about 3 CPU-minutes)",
    "icl-domains:llava-clip-m-icl": _OLD_RUN.format("icl") + " (its re-run on the rebuilt member is "
                                    "`icl-domains:llava-clip-m-icl-rebuilt`)",
}

IMAGE_LINK = re.compile(r"!\[[^\]]*\]\(([^)\s]+\.png)\)")
BLOCK = re.compile(r"^<!-- figure:([\w:-]+) -->$", re.M)


def _recipes(makefile: str) -> dict[str, list[str]]:
    """{target: its recipe's logical lines (continuations joined)} of the Makefile's figures targets."""
    recipes: dict[str, list[str]] = {}
    target = ""
    for line in makefile.replace("\\\n", " ").splitlines():
        header = re.match(r"^(figures-[\w-]+):", line)
        if header:
            target = header.group(1)
            recipes[target] = []
        elif line.startswith("\t") and target:
            recipes[target].append(line)
        elif line.strip():
            target = ""
    return recipes


def _loop_values(line: str) -> dict[str, list[str]]:
    """{VAR: its values} of the shell loops `for VAR in A B; do` of a recipe line."""
    return {var: values.split() for var, values in re.findall(r"for (\w+) in ([^;]+);", line)}


def made_images() -> dict[str, str]:
    """{image file name under docs/images: the Makefile target that writes it}: the figures that
    `$(FIGURES_WRITE)` (`robustvlm.figures --images docs/images`) rewrites and that have a picture."""
    made: dict[str, str] = {}
    for target, lines in _recipes((ROOT / "Makefile").read_text(encoding="utf-8")).items():
        for line in lines:
            if "$(FIGURES_WRITE)" not in line:
                continue
            loops = _loop_values(line)
            for name in re.findall(r"\s([\w:$-]+)=\S+", line.split("$(FIGURES_WRITE)", 1)[1]):
                var = next((v for v in loops if f"$${v}" in name), None)
                for value in loops[var] if var else [""]:
                    figure = name.replace(f"$${var}", value) if var else name
                    if figure.split(":", 1)[0] in IMAGES:
                        made[image_name(figure)] = target
    return made


def shown_images() -> dict[Path, list[Path]]:
    """{docs page: the images under docs/images it shows (resolved)}."""
    shown = {}
    for page in sorted(DOCS.rglob("*.md")):
        links = IMAGE_LINK.findall(page.read_text(encoding="utf-8"))
        shown[page] = [(page.parent / link).resolve() for link in links if "://" not in link]
    return shown


def test_every_results_page_with_a_figure_block_shows_a_picture():
    for page in sorted(RESULTS.glob("*.md")):
        text = page.read_text(encoding="utf-8")
        if BLOCK.search(text) and page.name not in NO_PICTURE:
            assert re.search(r"\]\(\.\./images/[^)]+\.png\)", text), (
                f"{page.relative_to(ROOT)} has figure blocks but shows no picture: add one drawn by "
                "`make figures` (figures.images.IMAGES) or list it in NO_PICTURE with the reason")
    assert set(NO_PICTURE) <= {p.name for p in RESULTS.glob("*.md")}


def test_every_figure_block_with_a_picture_shows_it():
    for page in sorted(RESULTS.glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for figure in BLOCK.findall(text):
            link = f"](../images/{image_name(figure)})"
            if figure in NOT_DRAWN:
                assert link not in text, f"{page.relative_to(ROOT)}: figure {figure}'s picture is drawn: drop it from NOT_DRAWN"
            elif figure.split(":", 1)[0] in IMAGES:
                assert f"](../images/{image_name(figure)})" in text, (
                    f"{page.relative_to(ROOT)}: figure {figure} has a picture (figures.images) that the "
                    f"page does not show: add ![what it shows](../images/{image_name(figure)}) under its block")


def test_every_shown_image_exists():
    made = made_images()
    images = (DOCS / "images").resolve()
    for page, paths in shown_images().items():
        for path in paths:
            where = f"{page.relative_to(ROOT)} shows {path}"
            assert path.is_relative_to(images), f"{where}: pictures live under docs/images"
            target = made.get(path.relative_to(images).as_posix())
            assert path.is_file(), f"{where}, which does not exist" + (f": run `make {target}`" if target else "")


def test_not_drawn_names_figure_blocks_of_the_results_pages():
    blocks = {figure for page in RESULTS.glob("*.md") for figure in BLOCK.findall(page.read_text(encoding="utf-8"))}
    assert set(NOT_DRAWN) <= blocks
    assert all(figure.split(":", 1)[0] in IMAGES for figure in NOT_DRAWN)


def test_the_makefile_reading_finds_the_figures_of_loops_and_continued_lines():
    made = made_images()
    assert made["icl-defined-labels-llava-clip-m-icl.png"] == "figures-icl"  # from a shell loop
    assert made["ladder-zoo-llava.png"] == "figures-ladder-zoo"  # on a continued line
    assert made["reward-matrix.png"] == "figures-reward"
    assert "ladder-zoo-oracle.png" not in made  # a table without a picture
