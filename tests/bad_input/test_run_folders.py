"""Run folders: a second writer stops at once naming the process that holds the folder (issue
17.2); a folder holding a finished run is refused without --resume or with other settings; a
run that failed validation never blocks the corrected command (issue 17.3). Kinds of bad input
covered: 7 (four commands into a folder another process writes, --out on a finished run without
--resume, --resume with other settings, --resume into a folder of unknown files)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from bad_input import expect_clean_failure, run_cli

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "erm_tasks.yaml"
HOLDER = textwrap.dedent(
    """
    import sys, time
    from robustvlm.runs import lock_run_folder
    from pathlib import Path
    Path(sys.argv[1]).mkdir(parents=True, exist_ok=True)
    lock_run_folder(Path(sys.argv[1]))
    print("held", flush=True)
    time.sleep(60)
    """
)


@pytest.fixture
def held(tmp_path):
    """A folder whose lock another (live) process holds; yields (folder, holder pid)."""
    folder = tmp_path / "busy"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert holder.stdout.readline().strip() == "held"
    yield folder, holder.pid
    holder.send_signal(signal.SIGKILL)
    holder.wait()


def _scores(tmp_path: Path) -> Path:
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"id": "p", "env": "e", "rewards": [1.0, 2.0], "gold": [0.1, 0.9]}) + "\n")
    return path


def _bench(tmp_path: Path) -> Path:
    path = tmp_path / "q.jsonl"
    row = {"id": "q", "image": "a.png", "question": "?", "options": ["a", "b"], "answer": 1, "source": "s",
           "dataset_class": "b", "prompt": "?"}
    path.write_text(json.dumps(row) + "\n")
    return path


WRITERS = {
    "train": lambda t, out: ["train", str(CONFIG), "--out", str(out), "train.steps=1"],
    "eval": lambda t, out: ["eval", "--model", "tiny:idefics3", "--data", str(t / "nodata"), "--out", str(out)],
    "mc-eval": lambda t, out: ["mc", "eval", "--model", "tiny:idefics3", "--benchmark", str(_bench(t)), "--out", str(out)],
    "rm-bon": lambda t, out: ["rm", "bon", "--scores", f"A={_scores(t)}", "--out", str(out)],
}


@pytest.mark.parametrize("command", list(WRITERS))
def test_a_second_writer_stops_at_once_naming_the_holder(command, held, tmp_path, capsys):
    folder, pid = held
    if command == "eval":
        from robustvlm.data.synth import synthesize

        synthesize("tasks", tmp_path / "nodata", seed=0, n_per_env=1)
    expect_clean_failure(WRITERS[command](tmp_path, folder), capsys,
                         mentions=[str(folder), f"being written by process {pid}"], untouched=folder)


@pytest.fixture(scope="module")
def finished_bon(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("bon")
    scores = _scores(root)
    assert run_cli(["rm", "bon", "--scores", f"A={scores}", "--out", str(root / "out")]) == 0
    return root / "out", scores


def test_a_finished_run_is_refused_without_resume(finished_bon, capsys):
    out, scores = finished_bon
    expect_clean_failure(["rm", "bon", "--scores", f"A={scores}", "--out", str(out)], capsys,
                         mentions=[str(out), "--resume"], untouched=out)


def test_resume_with_other_settings_names_the_keys(finished_bon, capsys):
    out, scores = finished_bon
    expect_clean_failure(["rm", "bon", "--scores", f"A={scores}", "--out", str(out), "--gold", "exact", "--resume"],
                         capsys, mentions=["differs in ['gold']"], untouched=out)


def test_resume_into_a_folder_of_unknown_files(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    expect_clean_failure(["rm", "bon", "--scores", f"A={_scores(tmp_path)}", "--out", str(out), "--resume"],
                         capsys, mentions=["robustvlm did not write"], untouched=out)


def test_a_run_that_failed_validation_does_not_block_the_corrected_command(tmp_path, capsys):
    """Issue 17.3: the failed command claimed the folder; the corrected one was refused."""
    out = tmp_path / "run"
    assert run_cli(["train", str(CONFIG), "--out", str(out), "train.steps=1", "data.benchmark=nope"]) == 2
    assert run_cli(["train", str(CONFIG), "--out", str(out), "train.steps=1", "train.save_every=1"]) == 0
    assert (out / "final").is_dir()
    capsys.readouterr()
