"""What a reader sees first is the finding and its picture (issue 56.1): each results page
(docs/results/*.md), the docs home and Getting started, rendered as the site renders them, opens with a verdict
and shows a captioned picture before its first table.

The caption convention: the picture, then a paragraph in italics that starts "Figure:" and says
what was measured, on which model and data, by which command (in `code`), at which commit and on
which machine. Every picture of those pages carries one. Pages without a picture yet are listed
in `NO_PICTURE_YET` with the reason; they fail strictly once they get one (xfail strict), so the
lead's `make figures` pass that draws them must also take them off the list.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

markdown = pytest.importorskip("markdown")

ROOT = Path(__file__).resolve().parents[1]
PAGES = [*sorted((ROOT / "docs" / "results").glob("*.md")), ROOT / "docs" / "index.md", ROOT / "docs" / "getting-started.md"]
#: the site's Markdown extensions that change what a page renders to (mkdocs.yml)
EXTENSIONS = ["admonition", "attr_list", "tables", "pymdownx.superfences"]
#: {page: why it has no picture yet}: drawn by the lead's `make figures` pass (issue 56.1)
NO_PICTURE_YET: dict[str, str] = {}
CAPTION = re.compile(r"<p><em>Figure: (.*?)</em></p>", re.S)


def rendered(page: Path) -> str:
    """A page's HTML as the site renders its Markdown."""
    return markdown.markdown(page.read_text(encoding="utf-8"), extensions=EXTENSIONS)


def pictures(html: str) -> list[tuple[int, str | None]]:
    """[(where each picture is in `html`, its caption's HTML or None)]: a caption is the paragraph
    right after the picture's own, in italics, starting "Figure:"."""
    found = []
    for image in re.finditer(r"<p><img [^>]*></p>", html):
        after = CAPTION.match(html, image.end() + (1 if html[image.end():image.end() + 1] == "\n" else 0))
        found.append((image.start(), after.group(1) if after else None))
    return found


def check_page(page: Path) -> None:
    html = rendered(page)
    shown = pictures(html)
    assert shown, "no picture"
    for where, caption in shown:
        assert caption is not None, f"the picture at {where} has no caption (*Figure: ...* after it)"
        assert "<code>" in caption, f"its caption names no command: {caption}"
        assert re.search(r"commit [0-9a-f]{7}", caption), f"its caption names no commit: {caption}"
        assert re.search(r"machine|cores", caption), f"its caption names no machine: {caption}"
    first_table = html.find("<table>")
    assert first_table == -1 or shown[0][0] < first_table, "the first table comes before the first picture"
    opening = html.split("</h1>", 1)[1].lstrip()
    assert opening.startswith("<p><strong>Finding.</strong>"), "the page does not open with its finding"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_page_opens_with_its_finding_and_a_captioned_picture_before_any_table(page):
    name = str(page.relative_to(ROOT))
    if name in NO_PICTURE_YET:
        if not _fails(page):
            pytest.fail(f"{name} now opens with a captioned picture: take it off NO_PICTURE_YET")
        pytest.xfail(NO_PICTURE_YET[name])
    check_page(page)


def _fails(page: Path) -> bool:
    try:
        check_page(page)
    except AssertionError:
        return True
    return False


def test_a_caption_is_found_only_right_after_its_picture():
    html = markdown.markdown("![a](x.png)\n\n*Figure: what, `cmd`, commit abcdef1, 2-core machine.*\n\n| a |\n|---|\n| 1 |\n",
                             extensions=EXTENSIONS)
    [(where, caption)] = pictures(html)
    assert "<code>cmd</code>" in caption and where < html.find("<table>")
    loose = markdown.markdown("![a](x.png)\n\nText.\n\n*Figure: late.*\n", extensions=EXTENSIONS)
    assert pictures(loose) == [(0, None)]
