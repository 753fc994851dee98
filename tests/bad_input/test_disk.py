"""A full disk and a read-only folder (issue 45.11-12): one error line naming the file, exit 2,
no traceback, nothing left half-written. The full disk is a 2 MiB tmpfs (root only, where the
machine allows mounting one); the read-only folder a read-only tmpfs (root ignores permission
bits, so a mode-555 folder would not do). Each is skipped, with the reason, where it cannot be
made. Kinds of bad input covered: 7 (data synth, configs copy and train onto a full disk, a
safetensors write refused, configs copy, mc build and eval into a read-only folder)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from bad_input import expect_clean_failure


@contextmanager
def small_tmpfs(folder: Path, *, read_only: bool = False) -> Iterator[Path]:
    """A 2 MiB tmpfs mounted at `folder` (remounted read-only with `read_only`), unmounted on exit;
    the test is skipped, with the reason, where it cannot be made."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.strip() or 'not root'})")
    try:
        if read_only:
            done = subprocess.run(["mount", "-o", "remount,ro", str(folder)], capture_output=True, text=True)
            if done.returncode != 0:
                pytest.skip(f"cannot remount read-only here ({done.stderr.strip()})")
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)


@pytest.fixture
def tight_disk(tmp_path):
    """An empty 2 MiB file system: room for a run's small files, not for a model's weights."""
    with small_tmpfs(tmp_path / "disk") as folder:
        yield folder


@pytest.fixture
def small_disk(tight_disk):
    """The 2 MiB file system, filled up to its last few kilobytes."""
    with (tight_disk / "filler").open("wb") as handle:
        try:
            handle.write(b"\0" * (2 << 20))
        except OSError:
            pass
    return tight_disk


@pytest.fixture
def read_only(tmp_path):
    """A read-only file system (a tmpfs remounted ro), unmounted afterwards."""
    with small_tmpfs(tmp_path / "ro", read_only=True) as folder:
        yield folder


@pytest.mark.parametrize("command", ["data synth", "configs copy"])
def test_a_full_disk_is_one_line_naming_the_file(command, small_disk, capsys):
    out = small_disk / "out"
    argv = (["data", "synth", "--benchmark", "tasks", "--n-per-env", "40", "--out", str(out)]
            if command == "data synth" else ["configs", "copy", "erm_tasks", str(out)])
    expect_clean_failure(argv, capsys, mentions=[str(out), "No space left on device"])


def test_a_full_disk_while_training_is_one_line_and_keeps_what_was_finished(tight_disk, capsys):
    """The weights (safetensors, whose error is no OSError) do not fit: one line naming the run
    folder and saying finished work is kept, exit 2."""
    out = tight_disk / "run"
    line = expect_clean_failure(["train", "erm_tasks", "--out", str(out), "train.steps=2",
                                 "train.save_every=1"],
                                capsys, mentions=[str(out), "No space left on device", "--resume"])
    assert "kept" in line


def test_a_weights_write_refused_by_the_disk_is_one_line_naming_the_file(monkeypatch, tmp_path, capsys):
    """safetensors raises its own error, not OSError, when the disk is full while weights are written."""
    from safetensors import SafetensorError

    import robustvlm.cli.configs as configs_cli

    weights = tmp_path / "run" / "model.safetensors"

    def full(args):
        raise SafetensorError(f'Error while serializing: I/O error: No space left on device (os error 28) at path "{weights}"')

    monkeypatch.setattr(configs_cli, "_list", full)
    line = expect_clean_failure(["configs", "list"], capsys, mentions=[str(weights), "No space left on device"])
    assert "kept" in line and "--resume" not in line  # `configs list` has no --resume: never advised


@pytest.mark.parametrize("command", ["configs copy", "mc build", "eval"])
def test_a_read_only_folder_is_refused_naming_it(command, read_only, tmp_path, capsys, tasks_data):
    out = read_only / "c"
    argv = {"configs copy": ["configs", "copy", "erm_tasks", str(out)],
            "mc build": ["mc", "build", "--data", str(tasks_data), "--out", str(out / "q.jsonl")],
            "eval": ["eval", "--model", "tiny:idefics3", "--data", str(tasks_data), "--out", str(out)]}[command]
    expect_clean_failure(argv, capsys, mentions=[str(read_only), "not writable"])
    assert list(read_only.iterdir()) == []
