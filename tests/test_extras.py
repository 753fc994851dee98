"""A command that needs an optional extra that is not installed stops before any work with one
line naming the extra (exit 1), never a traceback mid-run (issue 33.4). The extra's modules are
hidden from the import system here (`sys.modules[NAME] = None`), as if not installed."""

from __future__ import annotations

import sys

import pytest
from bad_input import run_cli

from robustvlm.extras import EXTRAS, installed, require


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
