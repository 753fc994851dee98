"""Commands print where their outputs are, as absolute paths (issue 33.5)."""

from __future__ import annotations

import pytest
from bad_input import run_cli


@pytest.mark.slow
def test_study_prints_where_its_report_is(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert run_cli(["study", "configs/study_tasks.yaml", "--smoke", "--out", "st"]) == 0  # a built-in config
    out = capsys.readouterr().out
    assert f"report: {tmp_path / 'st' / 'report.md'} and {tmp_path / 'st' / 'report.html'}" in out
    assert (tmp_path / "st" / "report.md").is_file() and (tmp_path / "st" / "report.html").is_file()


def test_configs_copy_prints_the_absolute_path(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert run_cli(["configs", "copy", "reward/standard", "mine"]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {tmp_path / 'mine' / 'reward' / 'standard.yaml'}"
    assert run_cli(["configs", "copy", "reward/standard", "mine"]) == 2  # never overwrites


@pytest.mark.slow
def test_mc_build_env_keeps_one_domain_or_several(tmp_path, capsys):
    """`mc build --env NAME` builds one benchmark per domain of a data folder (issue 33.5: the
    documented example mixed all four domains)."""
    import json

    assert run_cli(["data", "synth", "--benchmark", "domains", "--out", str(tmp_path / "d"), "--n-per-env", "10"]) == 0
    digits = str(tmp_path / "d" / "digits")
    for envs in (["noisy"], ["clean", "rotated"]):
        out = tmp_path / f"{'-'.join(envs)}.jsonl"
        argv = ["mc", "build", "--data", digits, "--out", str(out), "--k", "3"]
        assert run_cli(argv + [a for env in envs for a in ("--env", env)]) == 0
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert rows and {r["source"] for r in rows} == set(envs)
        assert f"to {out}" in capsys.readouterr().out
    assert run_cli(["mc", "build", "--data", digits, "--out", str(tmp_path / "x.jsonl"), "--env", "sepia"]) == 2
    assert "--env sepia: not in" in capsys.readouterr().err
