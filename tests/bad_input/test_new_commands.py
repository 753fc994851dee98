"""The commands added after the first reliability rounds (issue 45): `zoo build / list /
probe-context`, `compare`, `configs copy`, `mc build`'s blind filter and long or undecodable
output paths. Each case is one bad input or misuse: one `error:` line naming the input, exit 2, no
traceback, no file outside the case's own folder written, the user's files unchanged. Kinds of
bad input covered: 22 (probe-context into a folder of the user's files, into the current folder,
into an existing file, a NaN and a negative learning rate, a window longer than the run; zoo build
of an empty and of a blank member list; compare into its own earlier output, with duplicated
question ids, duplicated rows, a string score and a NaN score; configs copy onto a dangling
symlink and into a file; mc build's --filter-method and --base-url without --filter-blind; eval
--out with a 300-character component, a path over 4,096 bytes and undecodable bytes; a torn
zoo_member.json in zoo list)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from bad_input import expect_clean_failure, run_cli, snapshot

PROBE = ["zoo", "probe-context", "--fresh-depth", "1", "--steps", "1", "--every", "1", "--n-images", "10",
         "--batch-size", "1", "--queries", "1"]


def _users_folder(root: Path) -> Path:
    """A folder of the user's own files (issue 45.1: its probe.json was overwritten)."""
    folder = root / "userdata"
    folder.mkdir()
    (folder / "probe.json").write_text('{"mine": true}', encoding="utf-8")
    (folder / "notes.txt").write_text("mine", encoding="utf-8")
    return folder


def _mc_rows(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def _two_runs(root: Path, b_rows: list[dict]) -> list[str]:
    a = _mc_rows(root / "a.jsonl", [{"id": f"q{i}", "env": "e", "correct": i % 2} for i in range(4)])
    return ["compare", a, _mc_rows(root / "b.jsonl", b_rows), "--n-boot", "100"]


GOOD_B = [{"id": f"q{i}", "env": "e", "correct": 1} for i in range(4)]

#: {case: (setup(root) -> (argv, mentions))}; every case runs with the current folder at `root`.
CASES: dict[str, Callable[[Path], tuple[list[str], list[str]]]] = {
    "probe-into-users-folder": lambda t: ([*PROBE, "--out", str(_users_folder(t))], ["userdata", "did not write"]),
    "probe-into-current-folder": lambda t: (os.chdir(_users_folder(t)) or [*PROBE, "--out", "."], ["current folder"]),
    "probe-into-a-file": lambda t: ((t / "f").write_text("mine") and [*PROBE, "--out", str(t / "f")],
                                    [str(t / "f"), "not a folder"]),
    "probe-lr-nan": lambda t: ([*PROBE, "--lr", "nan", "--out", str(t / "p")], ["--lr", "nan"]),
    "probe-lr-negative": lambda t: ([*PROBE, "--lr", "-1", "--out", str(t / "p")], ["--lr", "-1"]),
    "probe-every-over-steps": lambda t: ([*PROBE[:4], "--steps", "3", "--every", "10", "--out", str(t / "p")],
                                         ["--every 10", "--steps 3"]),
    "zoo-build-empty-members": lambda t: (["zoo", "build", "--members", ""], ["--members", "no member"]),
    "zoo-build-blank-members": lambda t: (["zoo", "build", "--members", " , "], ["--members", "no member"]),
    "compare-duplicate-ids": lambda t: (_two_runs(t, [*GOOD_B[:3], {"id": "q1", "env": "e", "correct": 0}]),
                                        ["b.jsonl", "'q1'", "twice"]),
    "compare-duplicate-rows": lambda t: (_two_runs(t, [*GOOD_B, GOOD_B[0]]), ["b.jsonl", "'q0'", "twice"]),
    "compare-string-score": lambda t: (_two_runs(t, [*GOOD_B[:3], {"id": "q3", "env": "e", "correct": "yes"}]),
                                       ["b.jsonl", "'q3'", "'yes'"]),
    "compare-nan-score": lambda t: (_two_runs(t, [*GOOD_B[:3], {"id": "q3", "env": "e", "correct": float("nan")}]),
                                    ["b.jsonl", "'q3'", "finite"]),
    "configs-copy-onto-dangling-symlink": lambda t: (_dangling(t), ["erm_tasks.yaml", "symbolic link"]),
    "configs-copy-into-a-file": lambda t: ((t / "c").write_text("mine") and ["configs", "copy", "erm_tasks", str(t / "c")],
                                           [str(t / "c"), "not a folder"]),
    "mc-build-filter-method-alone": lambda t: (["mc", "build", "--data", str(t), "--out", str(t / "q.jsonl"),
                                                "--filter-method", "generate"], ["--filter-method", "--filter-blind"]),
    "mc-build-base-url-alone": lambda t: (["mc", "build", "--data", str(t), "--out", str(t / "q.jsonl"),
                                           "--base-url", "http://127.0.0.1:9/v1"], ["--base-url", "--filter-blind"]),
    "eval-out-long-component": lambda t: (_eval(t, str(t / ("x" * 300))), ["xxxx", "too long"]),
    "eval-out-long-path": lambda t: (_eval(t, str(t / "/".join(["y" * 200] * 21))), ["yyyy", "too long"]),
    "eval-out-undecodable": lambda t: (_eval(t, str(t / os.fsdecode(b"caf\xe9"))), ["caf", "UTF-8"]),
}


def _dangling(root: Path) -> list[str]:
    """A folder whose erm_tasks.yaml is a link to a missing file outside it (issue 45.3)."""
    (root / "cfg").mkdir()
    (root / "cfg" / "erm_tasks.yaml").symlink_to(root / "outside" / "planted.yaml")
    return ["configs", "copy", "erm_tasks", str(root / "cfg")]


def _eval(root: Path, out: str) -> list[str]:
    return ["eval", "--model", "tiny:idefics3", "--data", str(root / "none.jsonl"), "--out", out]


@pytest.mark.parametrize("case", list(CASES))
def test_a_new_command_refuses_bad_input_cleanly(case, tmp_path, capsys, monkeypatch):
    root = tmp_path / "case"
    root.mkdir()
    monkeypatch.chdir(root)
    argv, mentions = CASES[case](root)
    before = snapshot(root)
    expect_clean_failure(argv, capsys, mentions=mentions)
    assert snapshot(root) == before, "a file of the user (or an input) changed"
    assert {p.name for p in tmp_path.iterdir()} <= {"case", "response_cache"}, "wrote outside its folder"
    assert not (root / "outside").exists()


def test_compare_into_its_own_earlier_output_needs_resume(tmp_path, capsys):
    """Issue 45.2: a second `compare --out` replaced compare.json and compare.md."""
    argv = [*_two_runs(tmp_path, GOOD_B), "--out", str(tmp_path / "cmp")]
    assert run_cli(argv) == 0
    expect_clean_failure(argv, capsys, mentions=[str(tmp_path / "cmp"), "--resume"], untouched=tmp_path / "cmp")
    assert run_cli([*argv, "--resume"]) == 0


def test_a_torn_zoo_member_card_is_reported_not_raised(tmp_path, capsys, monkeypatch):
    """Issue 45.15: `zoo list` raised JSONDecodeError on a torn zoo_member.json."""
    from robustvlm.models.zoo_recipes import member_dir, recipe

    monkeypatch.setenv("ROBUSTVLM_CACHE", str(tmp_path))
    folder = member_dir(recipe("quick-clip"))
    folder.mkdir(parents=True)
    (folder / "zoo_member.json").write_text('{"name": "quick-clip", "heldout', encoding="utf-8")
    assert run_cli(["zoo", "list"]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    row = next(line for line in out.splitlines() if line.startswith("zoo:quick-clip\t"))
    assert "\tdamaged\t" in row and str(folder / "zoo_member.json") in err
