"""Getting started's tour, run as written, shows what the page promises (issue 46.2:
the page promised chrF near 0.1 while its 20 steps gave 0.000, and the documented-commands test
ran it with 2 steps, so the promised figure was never checked)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from bad_input import run_cli

ROOT = Path(__file__).resolve().parents[1]


def tour_lines(page: Path) -> list[str]:
    """The `robustvlm` lines of the first code block after the page's "A first tour" heading."""
    text = page.read_text(encoding="utf-8").split("## A first tour", 1)[1]
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block is not None, f"{page}: no code block in the tour"
    return [line for line in block.group(1).splitlines() if line.startswith("robustvlm ")]


@pytest.mark.slow
def test_the_tour_at_its_own_settings_gives_the_promised_figures(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for line in tour_lines(ROOT / "docs" / "getting-started.md"):
        assert run_cli(shlex.split(line)[1:]) == 0, line
    metrics = json.loads((tmp_path / "runs" / "erm_tour" / "eval" / "metrics.json").read_text())
    predictions = [json.loads(row) for row in (tmp_path / "runs" / "erm_tour" / "eval" / "predictions.jsonl").open()]
    # the page: in-domain chrF about 0.2 (0.23 measured), near 0 on the held-out OCR tasks (0.01),
    # and answers in the tasks' format (none empty)
    assert 0.15 <= metrics["id"]["chrf"] <= 0.35, metrics["id"]
    assert metrics["ood"]["chrf"] <= 0.05, metrics["ood"]
    assert metrics["ood"]["exact"] == 0.0
    assert all(row["prediction"].strip() for row in predictions)
