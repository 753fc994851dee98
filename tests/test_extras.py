"""A command that needs an optional extra that is not installed stops before any work with one
line naming the extra (exit 1), never a traceback mid-run (issue 33.4). The extra's modules are
hidden from the import system here (`sys.modules[NAME] = None`), as if not installed."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from bad_input import run_cli

from robustvlm.extras import EXTRAS, installed, require

ROOT = Path(__file__).resolve().parents[1]


def _hide(monkeypatch, extra: str) -> None:
    for module in EXTRAS[extra]:
        monkeypatch.setitem(sys.modules, module, None)


def test_require_names_the_extra(monkeypatch):
    assert installed("wordnet")  # the dev install has every extra
    _hide(monkeypatch, "wordnet")
    assert not installed("wordnet")
    with pytest.raises(Exception, match=r'^diagnose needs the \[wordnet\] extra: pip install "robustvlm\[wordnet\]"$'):
        require("wordnet", "diagnose")


@pytest.mark.slow
@pytest.mark.parametrize("extra, argv", [
    ("data", ["demo", "--quick", "--out", "{tmp}/demo"]),
    ("metrics", ["demo", "tasks", "--quick", "--out", "{tmp}/tasks"]),
    ("wordnet", ["diagnose", "--model", "tiny:idefics3", "--data", "{tmp}/none", "--out", "{tmp}/diag"]),
    ("wordnet", ["mc", "build", "--data", "{tmp}/none", "--out", "{tmp}/q.jsonl", "--distractors", "wordnet"]),
    ("metrics", ["mc", "build", "--data", "{tmp}/none", "--out", "{tmp}/q.jsonl", "--distractors", "text"]),
    ("data", ["data", "synth", "--benchmark", "mnist", "--out", "{tmp}/mnist"]),
    ("corruptions", ["data", "corrupt", "{tmp}/none", "--out", "{tmp}/corrupted"]),
    ("data", ["demo", "robustness", "--quick", "--out", "{tmp}/rob"]),
    ("tensorboard", ["train", "erm_tasks", "--out", "{tmp}/run", "train.report_to=[tensorboard]"]),
], ids=lambda v: v if isinstance(v, str) else " ".join(v[:2]))
def test_a_missing_extra_stops_the_command_at_once(extra, argv, tmp_path, monkeypatch, capsys):
    _hide(monkeypatch, extra)
    code = run_cli([a.replace("{tmp}", str(tmp_path)) for a in argv])
    err = capsys.readouterr().err
    assert code == 1, err
    assert f'[{extra}] extra: pip install "robustvlm[{extra}]"' in err
    assert err.count("\n") == 1 and "Traceback" not in err
    # before any training: no weights, no training log
    assert not any(tmp_path.rglob("*.safetensors")) and not any(tmp_path.rglob("train_log.jsonl"))


def _docs_reference():
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "tools" / "docs_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_required_extra_is_declared_and_is_an_extra_of_pyproject():
    """The extras table says what needs each extra (issue 46.5: demo --quick needed [data] and the
    table said [metrics]); its rows come from NEEDED_BY, so every `require(EXTRA, ...)` of the
    package must be there."""
    import tomllib

    from robustvlm.extras import NEEDED_BY

    called = set()
    for path in (ROOT / "src" / "robustvlm").rglob("*.py"):
        called |= set(re.findall(r"""(?<![.\w])require\(\s*["'](\w+)["']\s*,\s*f?["']""", path.read_text(encoding="utf-8")))
    optional = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert called <= set(NEEDED_BY), f"required but not in NEEDED_BY: {called - set(NEEDED_BY)}"
    assert set(NEEDED_BY) == set(EXTRAS) and set(NEEDED_BY) <= set(optional)


def test_the_extras_tables_of_the_pages_are_the_generated_one():
    docs_reference = _docs_reference()
    for page in docs_reference.EXTRAS_PAGES:
        text = page.read_text(encoding="utf-8")
        assert docs_reference.EXTRAS_BLOCK.search(text), f"{page}: no extras-table block"
        assert docs_reference.with_extras_table(text) == text, f"{page}: run python tools/docs_reference.py"


IMPORT_ALL_WITHOUT_EXTRAS = """
import importlib, pkgutil, sys
from robustvlm.extras import EXTRAS
for modules in EXTRAS.values():
    for name in modules:
        sys.modules[name] = None  # as if not installed
import robustvlm
failed = []
for info in pkgutil.walk_packages(robustvlm.__path__, "robustvlm."):
    if info.name.endswith("__main__"):
        continue
    try:
        importlib.import_module(info.name)
    except ImportError as err:
        failed.append(f"{info.name}: {err}")
print("\\n".join(failed))
"""


@pytest.mark.slow
def test_every_module_imports_without_the_optional_extras():
    """Optional packages are imported where they are used, never at a module's top (issue 46.5:
    tools/docs_reference.py failed without nltk because data/wordnet.py imported it at the top)."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", IMPORT_ALL_WITHOUT_EXTRAS], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "", done.stdout
