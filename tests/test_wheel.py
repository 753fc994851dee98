"""The built wheel, installed with no extras into a fresh virtual environment, outside the
checkout: every command of the Getting started page run from an empty folder either works or
stops at once with one line naming the extra it needs (issue 33.4).

The fresh environment sees the test environment's packages through a .pth file (torch is never
downloaded), and the extras' modules are hidden there (`sys.modules[NAME] = None`, set by another
.pth file), which is what an install without extras looks like to robustvlm's check. robustvlm
itself is the wheel's copy: the editable install's finder is not loaded.
"""

from __future__ import annotations

import os
import re
import shlex
import site
import subprocess
import sys
import time
from pathlib import Path

import pytest

from robustvlm.extras import EXTRAS

ROOT = Path(__file__).resolve().parents[1]
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing of the checkout on the path
GETTING_STARTED = ROOT / "docs" / "getting-started.md"
#: what is appended to a documented line to run it with tiny settings
TINY = {"data synth": "--n-per-env 2", "train": "train.steps=2 train.save_every=2", "eval": "--max-new-tokens 4"}


def _documented_lines() -> list[str]:
    blocks = re.findall(r"```[a-z]*\n(.*?)```", GETTING_STARTED.read_text(encoding="utf-8"), re.S)
    return [re.sub(r"\s+#.*$", "", line.strip()) for block in blocks for line in block.splitlines()
            if line.strip().startswith("robustvlm ")]


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory) -> Path:
    """bin/ of a fresh venv with the built wheel installed (no extras)."""
    folder = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(folder / "dist"), str(ROOT)], check=True, capture_output=True)
    wheel = next((folder / "dist").glob("robustvlm-*.whl"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder / "venv")], check=True)
    venv_site = next((folder / "venv" / "lib").glob("python3*/site-packages"))
    shared = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (venv_site / "shared.pth").write_text("\n".join(shared) + "\n")
    hidden = [m for modules in EXTRAS.values() for m in modules]
    (venv_site / "zz_no_extras.pth").write_text(f"import sys; sys.modules.update(dict.fromkeys({hidden!r}))\n")
    python = folder / "venv" / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed", "-q", str(wheel)],
                   check=True, capture_output=True)
    return folder / "venv" / "bin"


@pytest.mark.slow
def test_getting_started_commands_work_or_name_the_extra_from_the_wheel(wheel_env, tmp_path):
    work = tmp_path / "empty"
    work.mkdir()
    located = subprocess.run([str(wheel_env / "python"), "-c", "import robustvlm; print(robustvlm.__file__)"],
                             capture_output=True, text=True, cwd=work, check=True, env=ENV).stdout
    assert str(wheel_env.parent) in located and str(ROOT) not in located  # the wheel's copy
    lines = _documented_lines()
    assert len(lines) >= 5
    named: dict[str, str] = {}  # line -> the extra it named
    for line in lines:
        argv = shlex.split(line)[1:]
        extra = next((v for k, v in TINY.items() if " ".join(argv[:len(k.split())]) == k), "")
        start = time.perf_counter()
        done = subprocess.run([str(wheel_env / "robustvlm"), *argv, *shlex.split(extra)],
                              capture_output=True, text=True, cwd=work, timeout=600, env=ENV)
        seconds = time.perf_counter() - start
        if done.returncode == 0:
            continue
        assert done.returncode == 1, f"{line}: exit {done.returncode}\n{done.stderr[-2000:]}"
        message = done.stderr.strip()
        assert re.fullmatch(r'error: .* needs the \[\w+\] extra: pip install "robustvlm\[\w+\]"', message), message
        assert seconds < 120, f"{line}: {seconds:.0f} s before naming the extra"
        named[line] = re.findall(r"\[(\w+)\]", message)[0]
    demo = next(line for line in lines if line.startswith("robustvlm demo"))
    assert named == {demo: "data"}  # the quick demo's MNIST digits; every other command worked
    assert not any((work / "demo_quick").rglob("train_log.jsonl"))  # it stopped before training
