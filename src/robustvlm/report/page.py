"""Report pages: one list of blocks rendered as Markdown (PNG links) and as a self-contained HTML
page (PNGs inlined as base64), so both always say the same thing."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from robustvlm.data.provenance import data_paragraphs
from robustvlm.report.tables import markdown_table

#: the last section of a report that read real-image data: which copy (`data.provenance`)
DATA_HEADING = "Data read"


@dataclass
class Heading:
    """A section title; level 1 is the page title."""

    text: str
    level: int = 2


@dataclass
class Paragraph:
    """Text; `code` spans render as code."""

    text: str


@dataclass
class Table:
    """Header and rows of cell strings."""

    header: list[str]
    rows: list[list[str]]


@dataclass
class Image:
    """A PNG beside the page, by file name, with its alt text."""

    file: str
    alt: str


Block = Heading | Paragraph | Table | Image


def to_markdown(blocks: Sequence[Block]) -> str:
    """Markdown page; images are linked by file name (relative to the report)."""
    parts = []
    for b in blocks:
        if isinstance(b, Heading):
            parts.append("#" * b.level + " " + b.text)
        elif isinstance(b, Paragraph):
            parts.append(b.text)
        elif isinstance(b, Table):
            parts.append(markdown_table(b.header, b.rows))
        else:
            parts.append(f"![{b.alt}]({b.file})")
    return "\n\n".join(parts) + "\n"


def to_html(blocks: Sequence[Block], image_dir: Path, title: str = "robustvlm report") -> str:
    """A standalone HTML page; each image (read from `image_dir`) is embedded as a base64 data URI."""
    body = []
    for b in blocks:
        if isinstance(b, Heading):
            body.append(f"<h{b.level}>{_inline(b.text)}</h{b.level}>")
        elif isinstance(b, Paragraph):
            body.append(f"<p>{_inline(b.text)}</p>")
        elif isinstance(b, Table):
            head = "".join(f"<th>{_inline(h)}</th>" for h in b.header)
            rows = "".join(
                "<tr>"
                + "".join(f"<td>{_inline(c.replace(chr(92) + '|', '|'))}</td>" for c in row)
                + "</tr>"
                for row in b.rows
            )
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        else:
            data = base64.b64encode((image_dir / b.file).read_bytes()).decode("ascii")
            body.append(f'<img alt="{html.escape(b.alt)}" src="data:image/png;base64,{data}">')
    style = (
        "body{font-family:sans-serif;max-width:1100px;margin:2em auto}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px}"
        "img{max-width:100%}"
    )
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title>"
        f"<style>{style}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def _inline(text: str) -> str:
    """Escape text for HTML and render `code` spans."""
    pieces = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(pieces))




def write_page(
    blocks: Sequence[Block], out_dir: str | Path, *, title: str, stem: str = "report"
) -> tuple[Path, Path]:
    """Write `<stem>.md` and `<stem>.html` into `out_dir` (where the images already are), ending
    with the `Data read` section when this command read real-image data; returns (md, html) paths."""
    out_dir = Path(out_dir)
    read = data_paragraphs()
    if read:  # which copy of the data this command read (issue 56.5)
        blocks = [*blocks, Heading(DATA_HEADING), *(Paragraph(line) for line in read)]
    md_path, html_path = out_dir / f"{stem}.md", out_dir / f"{stem}.html"
    md_path.write_text(to_markdown(blocks), encoding="utf-8")
    html_path.write_text(to_html(blocks, out_dir, title), encoding="utf-8")
    return md_path, html_path
