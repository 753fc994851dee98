"""The vision-gain section and files of a blind run (`--blind` on eval, mc eval, icl eval).

A run's gain comes in sections (one per model and benchmark, metric, or shots and policy), each
named by labels such as {"model": ..., "bench": ...} and holding `analysis.vision_gain` rows
(one per environment, then "all"). `write_vision_gain` writes beside the run's own files:

- vision_gain.csv: one line per (section, environment): the label columns, blind_input (what
  replaced the image), then `analysis.vision_gain.GAIN_COLUMNS`;
- vision_gain.json: {"sections": [{"labels", "blind_input", "rows"}]};
- vision_gain.md / vision_gain.html (figures inlined) and vision_gain-<i>.png: per section, a
  table and a bar chart of the gain per environment with its paired 95% interval.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robustvlm.analysis.vision_gain import GAIN_COLUMNS
from robustvlm.report.page import Block, Heading, Image, Paragraph, Table, write_page
from robustvlm.report.plots import bar_with_ci
from robustvlm.report.tables import fmt

STEM = "vision_gain"
ABOUT = (
    "The vision gain is the score with the image minus the score of the same model with the image "
    "removed (blind), on the same questions: a gain near 0 means the questions are answerable "
    "without looking. Interval: paired bootstrap 95% (rotations of one question resampled together); "
    "p: exact McNemar test of the questions only one run got right."
)


@dataclass(frozen=True)
class GainSection:
    """One table of the gain: its labels, what the blind run got instead of the image, its rows."""

    labels: Mapping[str, str]
    blind_input: str
    rows: Sequence[Mapping[str, Any]] = field(default_factory=list)

    @property
    def title(self) -> str:
        return ", ".join(f"{key} `{value}`" for key, value in self.labels.items())


#: the table's columns; the chart's axis names the gain by the same two of them
COLUMNS = ("environment", "n", "with image", "blind", "gain", "95% interval", "McNemar p")
GAIN_AXIS = f"gain: {COLUMNS[2]} - {COLUMNS[3]}"


def _cells(row: Mapping[str, Any]) -> list[str]:
    p = row["mcnemar_p"]
    return [str(row["env"]), str(row["n"]), fmt(row["normal"]), fmt(row["blind"]), fmt(row["gain"]),
            f"[{fmt(row['ci_lo'])}, {fmt(row['ci_hi'])}]", "—" if p is None else f"{p:.3g}"]


def vision_gain_blocks(sections: Sequence[GainSection], out_dir: Path) -> list[Block]:
    """The section's blocks (a heading, the explanation, per section a table and a figure drawn
    into `out_dir`), for a page of its own or inside another report."""
    blocks: list[Block] = [Heading("Vision gain (with the image minus blind)"), Paragraph(ABOUT)]
    for i, section in enumerate(sections):
        png = f"{STEM}-{i}.png"
        rows = list(section.rows)
        bar_with_ci([str(r["env"]) for r in rows], [r["gain"] for r in rows],
                    [min(r["ci_lo"], r["gain"]) for r in rows], [max(r["ci_hi"], r["gain"]) for r in rows],
                    out_dir / png, f"vision gain: {', '.join(section.labels.values())}", ylabel=GAIN_AXIS)
        blocks += [Heading(section.title, 3), Paragraph(f"blind input: {section.blind_input}"),
                   Table(list(COLUMNS), [_cells(r) for r in rows]),
                   Image(png, f"vision gain per environment, {section.title}")]
    return blocks


def write_vision_gain(sections: Sequence[GainSection], out_dir: str | Path, *, title: str) -> Path:
    """Write vision_gain.csv, .json, .md, .html and the figures into `out_dir` (module docstring);
    returns the HTML page's path."""
    out = Path(out_dir)
    label_keys = list(dict.fromkeys(key for s in sections for key in s.labels))
    with (out / f"{STEM}.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=[*label_keys, "blind_input", *GAIN_COLUMNS])
        writer.writeheader()
        for s in sections:
            writer.writerows({**s.labels, "blind_input": s.blind_input, **row} for row in s.rows)
    payload = [{"labels": dict(s.labels), "blind_input": s.blind_input, "rows": list(s.rows)} for s in sections]
    (out / f"{STEM}.json").write_text(json.dumps({"sections": payload}, indent=2), encoding="utf-8")
    blocks = [Heading(title, 1), *vision_gain_blocks(sections, out)]
    return write_page(blocks, out, title=title, stem=STEM)[1]


def gain_summary(out_dir: str | Path) -> str:
    """The gains written by `write_vision_gain` into `out_dir` as plain text for the terminal,
    ending with the report's path."""
    out = Path(out_dir)
    lines = []
    for s in json.loads((out / f"{STEM}.json").read_text(encoding="utf-8"))["sections"]:
        lines.append(f"vision gain, {', '.join(f'{k} {v}' for k, v in s['labels'].items())} (blind: {s['blind_input']})")
        lines += [f"  {r['env']:<16} n={r['n']:<5} with image {r['normal']:.3f}  blind {r['blind']:.3f}  "
                  f"gain {r['gain']:+.3f} [{r['ci_lo']:+.3f}, {r['ci_hi']:+.3f}]" for r in s["rows"]]
    lines.append(f"report: {(out / f'{STEM}.html').absolute()}")
    return "\n".join(lines)
