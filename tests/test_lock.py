"""The lock (requirements/lock.txt, written by tools/lock.py): one exact version per package, and
every dependency and extra dependency of pyproject.toml present at a version its range allows."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "lock.txt"


def _lock() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in LOCK.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and name.strip() and version.strip(), f"lock line {line!r} is not name==version"
            key = canonicalize_name(name)
            assert key not in pins, f"{name} pinned twice"
            pins[key] = Version(version)
    return pins


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    found = [Requirement(r) for r in project["dependencies"]]
    found += [Requirement(r) for extra in project["optional-dependencies"].values() for r in extra]
    return [r for r in found if canonicalize_name(r.name) != "robustvlm"]  # `all` names the other extras


def test_the_lock_satisfies_every_dependency_and_extra_of_pyproject():
    pins = _lock()
    assert pins[canonicalize_name("torch")] == Version("2.13.0")
    assert "robustvlm" not in pins
    wrong = [f"{r}: {'missing' if canonicalize_name(r.name) not in pins else pins[canonicalize_name(r.name)]}"
             for r in _requirements()
             if canonicalize_name(r.name) not in pins or not r.specifier.contains(pins[canonicalize_name(r.name)],
                                                                                 prereleases=True)]
    assert not wrong, f"the lock does not satisfy pyproject.toml ({wrong}): run `make lock`"


def test_the_lock_command_writes_name_equals_version_lines_without_robustvlm():
    spec = importlib.util.spec_from_file_location("lock_tool", ROOT / "tools" / "lock.py")
    assert spec and spec.loader
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    freeze = "# Editable install\n-e /work/robustvlm\nZlib-thing==1.0\ntorch==2.13.0+cpu\nnumpy==2.4.6\n"
    assert tool.lock_lines(freeze) == ["numpy==2.4.6", "torch==2.13.0", "Zlib-thing==1.0"]
