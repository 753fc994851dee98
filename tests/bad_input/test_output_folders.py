"""Output folders (issue 29.5-7, 13, 14, 23): a run never mixes its files with files robustvlm
did not write, nor replaces them. A non-empty folder holding no robustvlm run (the current one
included), the file-system root and the home folder are refused; an existing file, or a place
that cannot be created, is one error line naming it; a built-in benchmark or a questions file is
replaced only with --overwrite; and a folder holding another command's run is named as such.
Kinds of bad input covered: 16 (a folder of the user's files as --out for train and rm bon, the
current folder, the root, the home folder, an existing file for train and rm bon, three places
that cannot be created, an existing questions file, mc build --out a folder, data synth over
another benchmark, train --resume into an eval run and into an rm bon run, eval into a train
run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bad_input import expect_clean_failure, run_cli, snapshot
from stub_openai_server import StubOpenAIServer

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "erm_tasks.yaml"


def _scores(folder: Path) -> Path:
    path = folder / "s.jsonl"
    path.write_text(json.dumps({"id": "p", "env": "e", "rewards": [1.0, 2.0], "gold": [0.1, 0.9]}) + "\n")
    return path


def _bon(out: Path | str, scores: Path) -> list[str]:
    return ["rm", "bon", "--scores", f"A={scores}", "--out", str(out)]


def _train(out: Path | str, *extra: str) -> list[str]:
    return ["train", str(CONFIG), "--out", str(out), "train.steps=1", *extra]


def _users_files(folder: Path) -> Path:
    """The folder of issue 29.5: the user's own files where a run would write its own."""
    for name, text in {"final/mine.txt": "mine", "checkpoints/step-000002/notes.txt": "notes",
                       "train_log.jsonl": '{"mine": 1}\n'}.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


@pytest.mark.parametrize("command", ["train", "rm bon"])
def test_a_folder_of_the_users_files_is_refused(command, tmp_path, capsys):
    """Issue 29.5: `train --out DIR` deleted DIR/final/mine.txt and the checkpoint notes."""
    folder = _users_files(tmp_path / "mine")
    argv = _train(folder) if command == "train" else _bon(folder, _scores(tmp_path))
    expect_clean_failure(argv, capsys, mentions=[str(folder), "did not write"], untouched=folder)
    assert not (folder / "run.lock").exists() and not (folder / "config.resolved.yaml").exists()


def test_the_current_folder_holding_the_users_files_is_refused(tmp_path, capsys, monkeypatch):
    folder = _users_files(tmp_path / "here")
    monkeypatch.chdir(folder)
    expect_clean_failure(_train("."), capsys, mentions=["current folder", "did not write"], untouched=folder)


def test_the_file_system_root_is_refused(tmp_path, capsys):
    """Issue 29.6: `--out /` wrote config.resolved.yaml, run.lock, checkpoints/ and final/ into /."""
    written = [Path("/config.resolved.yaml"), Path("/run.lock"), Path("/bon.json")]
    before = [p.exists() for p in written]
    expect_clean_failure(_bon("/", _scores(tmp_path)), capsys, mentions=["file-system root"])
    assert [p.exists() for p in written] == before


def test_the_home_folder_is_refused(tmp_path, capsys, monkeypatch):
    home = tmp_path / "home"
    (home / ".profile").parent.mkdir(parents=True)
    (home / ".profile").write_text("mine")
    monkeypatch.setenv("HOME", str(home))
    expect_clean_failure(_bon("~", _scores(tmp_path)), capsys, mentions=["home folder"], untouched=home)
    expect_clean_failure(_bon(home, _scores(tmp_path)), capsys, mentions=["home folder"], untouched=home)


@pytest.mark.parametrize("command", ["train", "rm bon"])
def test_an_existing_file_as_out(command, tmp_path, capsys):
    """Issue 29.13: FileExistsError."""
    path = tmp_path / "a_file"
    path.write_text("mine")
    argv = _train(path) if command == "train" else _bon(path, _scores(tmp_path))
    expect_clean_failure(argv, capsys, mentions=[str(path), "not a folder"])
    assert path.read_text() == "mine"


@pytest.mark.parametrize("where", ["under-a-file", "in-proc", "synth-under-a-file"])
def test_an_out_that_cannot_be_created(where, tmp_path, capsys):
    """Issue 29.14: FileNotFoundError (and NotADirectoryError under a file)."""
    (tmp_path / "a_file").write_text("mine")
    out = "/proc/robustvlm-test/out" if where == "in-proc" else str(tmp_path / "a_file" / "out")
    argv = (["data", "synth", "--benchmark", "tasks", "--out", out] if where.startswith("synth")
            else _bon(out, _scores(tmp_path)))
    expect_clean_failure(argv, capsys, mentions=[out, "cannot create"])


@pytest.fixture(scope="module")
def domains(tmp_path_factory) -> Path:
    from robustvlm.data.synth import synthesize

    root = tmp_path_factory.mktemp("domains")
    synthesize("domains", root, seed=0, n_per_env=1)
    return root / "shapes"


def test_mc_build_over_an_existing_benchmark_needs_overwrite(domains, tmp_path, capsys):
    """Issue 29.7: 12 questions became 2."""
    bench = tmp_path / "q.jsonl"
    assert run_cli(["mc", "build", "--data", str(domains), "--out", str(bench), "--k", "3"]) == 0
    before = snapshot(tmp_path)
    expect_clean_failure(["mc", "build", "--data", str(domains), "--out", str(bench), "--k", "3", "--n", "2"],
                         capsys, mentions=[str(bench), "--overwrite"])
    assert snapshot(tmp_path) == before
    assert run_cli(["mc", "build", "--data", str(domains), "--out", str(bench), "--k", "3", "--n", "2",
                    "--overwrite"]) == 0
    assert len(bench.read_text().splitlines()) == 2


def test_mc_build_into_a_folder(domains, tmp_path, capsys):
    expect_clean_failure(["mc", "build", "--data", str(domains), "--out", str(tmp_path), "--k", "3"], capsys,
                         mentions=[str(tmp_path), "is a folder"], untouched=tmp_path)


def test_data_synth_over_another_benchmark_needs_overwrite(tmp_path, capsys):
    """Issue 29.7: `tasks` became `spurious`."""
    out = tmp_path / "bench"
    synth = ["data", "synth", "--out", str(out), "--n-per-env", "1", "--benchmark"]
    assert run_cli([*synth, "tasks"]) == 0
    expect_clean_failure([*synth, "spurious"], capsys, mentions=[str(out), "'tasks'", "--overwrite"], untouched=out)
    assert run_cli([*synth, "spurious", "--overwrite"]) == 0
    assert json.loads((out / "manifest.json").read_text())["benchmark"] == "spurious"


@pytest.fixture(scope="module")
def eval_run(tmp_path_factory) -> Path:
    """An eval run folder (a served model answering from a stub server: no model to load)."""
    from robustvlm.data.synth import synthesize

    root = tmp_path_factory.mktemp("eval_run")
    synthesize("tasks", root / "data", seed=0, n_per_env=1)
    with StubOpenAIServer() as server:
        assert run_cli(["eval", "--model", "openai:m", "--base-url", server.url, "--data", str(root / "data"),
                        "--out", str(root / "ev"), "--max-per-env", "1", "--no-cache"]) == 0
    return root / "ev"


def test_train_resume_into_an_eval_run_says_so(eval_run, capsys):
    """Issue 29.23: it listed 40 differing keys."""
    line = expect_clean_failure(_train(eval_run, "--resume"), capsys,
                                mentions=[str(eval_run), "holds a `robustvlm eval` run", "not a `robustvlm train` run"],
                                untouched=eval_run)
    assert "differs" not in line


def test_train_resume_into_an_rm_bon_run_says_so(tmp_path, capsys):
    out = tmp_path / "bon"
    assert run_cli(_bon(out, _scores(tmp_path))) == 0
    expect_clean_failure(_train(out, "--resume"), capsys, mentions=["holds a `robustvlm rm bon` run"], untouched=out)


def test_eval_into_a_train_run_says_so(tmp_path, capsys):
    out = tmp_path / "run"
    assert run_cli(_train(out, "train.save_every=1", "data.n_per_env=2")) == 0
    expect_clean_failure(["eval", "--model", "openai:m", "--base-url", "http://127.0.0.1:9/v1", "--data",
                          str(out / "data"), "--out", str(out), "--resume"], capsys,
                         mentions=["holds a `robustvlm train` run", "not a `robustvlm eval` run"], untouched=out)
