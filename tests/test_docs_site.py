"""The documentation site: README stays a front door, nothing points outside the repository, the
generated reference pages match the code, and the site builds in strict mode."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "mkdocs.yml", *sorted((ROOT / "docs").rglob("*.md"))]


def test_readme_is_a_front_door():
    """Two screens (issue 46): the two commands first, and on the first screen what the demo needs."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 100
    first_block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert first_block is not None
    assert [line.split()[:2] for line in first_block.group(1).splitlines()] == [["make", "demo"], ["make", "test"]]
    first_screen = "\n".join(text.splitlines()[:25])
    for way in ("dataset-fashion-mnist", "robustvlm data fetch fashion-mnist", "--data-root", "ROBUSTVLM_FASHION_MNIST"):
        assert way in first_screen, f"README's first screen does not say the demo's data comes from {way}"


def test_readme_picture_is_the_one_make_demo_draws():
    """README's picture is the file `make figures-readme` copies from `make demo`'s output folder: the
    demo's own ladder.png (tests/experiments/demos/test_default_demo.py checks the demo writes it)."""
    picture = re.search(r"!\[[^\]]*\]\(([^)]+)\)", (ROOT / "README.md").read_text(encoding="utf-8"))
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    demo = re.search(r"^demo: .*\n\t\$\(BIN\)/robustvlm demo --out (\S+)$", makefile, re.M)
    copy = re.search(r"^figures-readme: demo\n\tcp (\S+) (\S+)$", makefile, re.M)
    assert picture is not None and demo is not None and copy is not None
    assert copy.groups() == (f"{demo.group(1)}/ladder.png", picture.group(1))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_points_outside_the_repository(page):
    text = page.read_text(encoding="utf-8")
    assert not re.search(r"\.\./shared|/work/|design\.md", text), f"{page}: names a file outside the repository"
    for target in re.findall(r"\]\(([^)#\s]+)", text):  # markdown links to files
        if "://" in target:
            continue
        resolved = (page.parent / target).resolve()
        assert resolved.is_relative_to(ROOT), f"{page}: link {target} leaves the repository"
        assert resolved.exists(), f"{page}: link {target} is broken"


@pytest.mark.slow
def test_generated_reference_pages_match_the_code():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "docs_reference.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="the [docs] extra is not installed")
def test_site_builds_in_strict_mode(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir",
                           str(tmp_path / "site")], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "reference" / "config.html").is_file()


_LIST_ITEM = re.compile(r"\s*(?:[-*+]|\d+\.)\s")


def lists_glued_to_a_paragraph(text: str) -> list[int]:
    """Line numbers (1-based) of list items that directly follow a paragraph line outside code
    blocks: Markdown renders them as that paragraph's text with a literal "- " (issue 46.8)."""
    found, fence, previous = [], False, ""
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
        elif (not fence and _LIST_ITEM.match(line) and previous.strip() and not _LIST_ITEM.match(previous)
              and not previous.startswith((" ", "<!--", "|"))):
            found.append(number)
        previous = line
    return found


def test_the_list_check_finds_a_glued_list():
    assert lists_glued_to_a_paragraph("What it shows:\n- one\n- two\n\nText:\n\n- three\n") == [2]
    assert lists_glued_to_a_paragraph("```\nx:\n- y\n```\n") == []


@pytest.mark.parametrize("page", [p for p in PAGES if p.suffix == ".md"], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_list_has_a_blank_line_before_it(page):
    assert lists_glued_to_a_paragraph(page.read_text(encoding="utf-8")) == [], (
        f"{page}: a list right after a paragraph line renders as run-on text; add a blank line")


def _words(title: str) -> set[str]:
    """The content words of a title, lower case, without a plural or possessive ending."""
    stop = {"a", "an", "the", "and", "of", "on", "in", "to", "for", "what"}
    return {w.rstrip("'").removesuffix("s") for w in re.findall(r"[a-z0-9'-]+", title.lower()) if w not in stop}


def _nav_pages(entries: list, section: str) -> list[tuple[str, str, str]]:
    """(section, nav title, page) for every page of mkdocs.yml's nav."""
    pages = []
    for entry in entries:
        for title, target in entry.items():
            pages += _nav_pages(target, title) if isinstance(target, list) else [(section, title, target)]
    return pages


def test_every_nav_name_is_the_name_on_its_page():
    """A reader who clicks "Quick demos' figures" lands on a page of that name (issue 46.8): every
    word of a nav title is in the page's heading, or the page is its section's (or the site's) front page."""
    site = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    wrong = []
    for section, title, page in _nav_pages(site["nav"], site["site_name"]):
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        heading = next(line[2:] for line in text.splitlines() if line.startswith("# "))
        if not (_words(title) <= _words(heading) or _words(section) == _words(heading)):
            wrong.append(f"{page}: nav {title!r}, page {heading!r}")
    assert not wrong, wrong
