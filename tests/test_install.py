"""Getting started's install, followed word for word in a fresh virtual environment outside the
checkout (issue 46.1: the page said `pip install "robustvlm[all]"`, which no index has). The
steps are read from the page, so a change to them is what is tested."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "getting-started.md"


def install_blocks() -> list[str]:
    """The code blocks of the page's Install section, in order: the venv and torch, the install
    from the clone, the wheel route, the check (dedented: they sit in a numbered list)."""
    section = PAGE.read_text(encoding="utf-8").split("## Install", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)\n\s*```", section, re.S)
    return ["\n".join(line.strip() for line in block.splitlines()) + "\n" for block in blocks]


def test_all_is_every_user_extra_docs_included():
    """Issue 56.6: `[all]` lacked `docs`, so Getting started's docs step failed after its install."""
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    [combined] = extras["all"]
    named = set(re.fullmatch(r"robustvlm\[([\w,]+)\]", combined)[1].split(","))
    assert named == set(extras) - {"all", "dev", "serve"} and "docs" in named


def test_the_install_section_is_the_four_steps_this_test_runs():
    venv, clone, wheel, check = install_blocks()
    assert "venv" in venv and "pip install torch==2.13.0" in venv
    assert clone.startswith("pip install ") and wheel.startswith("pip wheel ")
    assert check.startswith("robustvlm ")


def _checkout_copy(target: Path) -> None:
    """The checkout's tracked files, as a clone has them, copied to `target`."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source, copy = ROOT / name, target / name
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():  # src/robustvlm/configs/recipes -> ../../../configs
            if source.resolve().is_relative_to(ROOT.resolve()):  # never one leading out (a .venv link)
                copy.symlink_to(source.readlink())
        elif source.is_file():
            copy.write_bytes(source.read_bytes())


@pytest.mark.slow
def test_getting_started_installs_verbatim_in_a_fresh_venv_outside_the_checkout(tmp_path):
    venv, clone, wheel, check = install_blocks()
    copy, home, elsewhere = tmp_path / "robustvlm", tmp_path / "home", tmp_path / "elsewhere"
    for folder in (copy, home, elsewhere):
        folder.mkdir()
    _checkout_copy(copy)
    tour = [line for line in (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
            .split("## A first tour", 1)[1].splitlines() if line.startswith("robustvlm ")][:3]
    script = "\n".join([
        "set -ex", venv, f"cd {copy}", wheel, clone,  # the wheel, then the clone's own install over it
        f"cd {elsewhere}", check, *tour, "mkdocs --version",  # [all] holds the docs extra too
        "python -c 'import robustvlm, sys; print(robustvlm.__file__); sys.exit(\"/site-packages/\" not in robustvlm.__file__)'",
    ])
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not p.startswith(str(Path(sys.prefix))))
    env = {**{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
           "HOME": str(home), "PATH": path,
           "PYENV_ROOT": os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv")),  # python3 may be a pyenv shim
           # pip's own cache from the real home: the same packages, fetched once
           "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))}
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=3000)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "erm_tasks" in done.stdout  # `configs list`
    assert (elsewhere / "my_configs" / "erm_tasks.yaml").is_file() and (elsewhere / "data" / "tasks" / "manifest.json").is_file()
    assert (copy / "dist" / "robustvlm-0.1.0-py3-none-any.whl").is_file()
