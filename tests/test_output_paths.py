"""Commands print where their outputs are, as absolute paths (issue 33.5)."""

from __future__ import annotations

import pytest
from bad_input import run_cli


@pytest.mark.slow
def test_study_prints_where_its_report_is(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert run_cli(["study", "configs/study_tasks.yaml", "--dry-run", "--out", "st"]) == 0  # a built-in config
    out = capsys.readouterr().out
    assert f"report: {tmp_path / 'st' / 'report.md'} and {tmp_path / 'st' / 'report.html'}" in out
    assert (tmp_path / "st" / "report.md").is_file() and (tmp_path / "st" / "report.html").is_file()


def test_configs_copy_prints_the_absolute_path(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert run_cli(["configs", "copy", "reward/standard", "mine"]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {tmp_path / 'mine' / 'reward' / 'standard.yaml'}"
    assert run_cli(["configs", "copy", "reward/standard", "mine"]) == 2  # never overwrites
