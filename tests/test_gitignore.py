"""What the documented commands write stays out of `git status` (issue 56.6: the tour left `data/`,
`demo_quick/` and `my_configs/` untracked in the clone): the folder every documented or help
example line writes (`--out`, `--to`, `configs copy NAME FOLDER`), relative to the repository root,
is ignored by .gitignore."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from documented import documented_commands

ROOT = Path(__file__).resolve().parents[1]
#: placeholders the docs print for the user's own paths
PLACEHOLDERS = {"DIR", "FILE", "OUT", "DATA", "."}


def written_folders() -> list[str]:
    """The top folder of each relative output path the documented lines name, sorted."""
    found = set()
    for line in documented_commands():
        words = shlex.split(line)
        outputs = [words[i + 1] for i, w in enumerate(words[:-1]) if w in ("--out", "--to")]
        if words[1:3] == ["configs", "copy"] and len(words) > 4:
            outputs.append(words[4])
        for path in outputs:
            top = Path(path).parts[0]
            if not Path(path).is_absolute() and top.split(".")[0] not in PLACEHOLDERS and "$" not in path:
                found.add(top)
    return sorted(found)


def test_the_tours_outputs_are_among_them():
    assert {"data", "demo_quick", "my_configs", "runs", "demo_out_quick"} <= set(written_folders())


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
@pytest.mark.parametrize("folder", written_folders())
def test_each_folder_a_documented_command_writes_is_ignored(folder):
    probe = f"{folder}/written-by-a-documented-command"
    done = subprocess.run(["git", "check-ignore", "-q", "--no-index", probe], cwd=ROOT, check=False)
    assert done.returncode == 0, f"{folder}/ is written by a documented command: add /{folder}/ to .gitignore"
    assert not re.fullmatch(r"src|tests|docs|configs|tools|benchmarks", folder), folder
