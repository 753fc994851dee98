"""The documentation site: README stays a front door, nothing points outside the repository, the
generated reference pages match the code, and the site builds in strict mode."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "mkdocs.yml", *sorted((ROOT / "docs").rglob("*.md"))]


def test_readme_is_a_front_door():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 250


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_points_outside_the_repository(page):
    text = page.read_text(encoding="utf-8")
    assert not re.search(r"\.\./shared|/work/|design\.md", text), f"{page}: names a file outside the repository"
    for target in re.findall(r"\]\(([^)#\s]+)", text):  # markdown links to files
        if "://" in target:
            continue
        resolved = (page.parent / target).resolve()
        assert resolved.is_relative_to(ROOT), f"{page}: link {target} leaves the repository"
        assert resolved.exists(), f"{page}: link {target} is broken"


@pytest.mark.slow
def test_generated_reference_pages_match_the_code():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "docs_reference.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="the [docs] extra is not installed")
def test_site_builds_in_strict_mode(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir",
                           str(tmp_path / "site")], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "reference" / "config.html").is_file()
