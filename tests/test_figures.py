"""Measured tables come from code: the quick demos regenerate docs/quick_figures.md exactly, and
the figure blocks of the Results pages (docs/results/) are well formed (`robustvlm.figures`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from robustvlm.errors import ConfigError
from robustvlm.figures.registry import FIGURES, OWN_TEST_FIGURES
from robustvlm.figures.write import MATRIX_FIGURES, RUN_FILES, SERVED_FIGURES, render
from robustvlm.figures.write import main as figures_main
from robustvlm.report.figure_blocks import read_figure, read_stamp, update

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "docs" / "quick_figures.md"


@pytest.fixture(scope="module")
def quick_runs(quick_demo, tmp_path_factory) -> dict[str, Path]:
    """{figure name: the quick run it is rendered from} (the session's shared quick demos)."""
    runs = {"ladder": quick_demo("ladder"), "ladder-vlm": quick_demo("ladder"),
            **{name: quick_demo("reward") for name in FIGURES if name.startswith("reward-")}}
    runs["invariance"] = quick_demo("invariance")
    runs["invariance-eiil"] = quick_demo("invariance", "--n-envs", "2", "--methods", "erm,irm,irm_eiil")
    runs["invariance-spread"] = tmp_path_factory.mktemp("figures") / "invariance"  # a folder of runs, as make figures'
    runs["invariance-spread"].mkdir()
    (runs["invariance-spread"] / "3envs").symlink_to(runs["invariance"], target_is_directory=True)
    (runs["invariance-spread"] / "2envs").symlink_to(runs["invariance-eiil"], target_is_directory=True)
    return runs


@pytest.mark.parametrize("name", sorted(set(FIGURES) - set(MATRIX_FIGURES) - set(OWN_TEST_FIGURES) - set(RUN_FILES)
                                         - set(SERVED_FIGURES)))
def test_quick_figures_in_the_docs_are_what_the_code_produces(name, quick_runs):
    documented = read_figure(QUICK.read_text(encoding="utf-8"), name)
    assert render(name, quick_runs[name]) == documented, (
        f"docs/quick_figures.md's {name} table differs from what the code produces now; if the change "
        "is intended, rewrite it with `python -m robustvlm.figures`")


def test_every_figure_has_its_block_in_the_results_pages():
    readme = "\n".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs" / "results").glob("*.md")))
    for name in set(FIGURES) - set(MATRIX_FIGURES) - set(RUN_FILES) - set(SERVED_FIGURES):
        assert read_figure(readme, name).startswith("| ")
    for name in (*MATRIX_FIGURES, *RUN_FILES, *SERVED_FIGURES):  # one block per run (`rm matrix`, a measurement), tagged
        tags = re.findall(rf"<!-- figure:({re.escape(name)}:[\w-]+) -->", readme)
        assert tags and all(read_figure(readme, tag).startswith("| ") or _pending(readme, tag) for tag in tags)


def _pending(text: str, name: str) -> bool:
    """Whether block `name` is marked not measured yet (`python -m robustvlm.figures --pending`)."""
    stamp = read_stamp(text, name)
    return stamp is not None and stamp.kind == "pending"


def _matrix_folder(folder: Path) -> Path:
    """A two-seed `rm matrix` output (matrix.json, sfc.json) trained on `long`, tested on three
    environments."""
    ood = {"standard": {"plain": [0.50, 0.60], "short": [0.30, 0.40]},
           "shortcut_aware": {"plain": [0.80, 0.70], "short": [0.40, 0.45]}}
    matrix = {
        "labels": ["standard", "shortcut_aware"], "proxy_label": None,
        "seeds": [0, 1], "train_envs": ["long"], "test_envs": ["long", "plain", "short"],
        "cells": {lb: {f"long->{env}": {"values": v} for env, v in cells.items()} for lb, cells in ood.items()},
        "averages": {lb: {"ood": {"values": [(a + b) / 2 for a, b in zip(c["plain"], c["short"])]}}
                     for lb, c in ood.items()},
        "sfd_average": {"standard": {"values": [0.40, 0.30]}, "shortcut_aware": {"values": [0.10, 0.25]}},
    }
    sfc = [{"proxy_wrong": 0.20, "weight_proxy_wrong": 0.30}, {"proxy_wrong": 0.25, "weight_proxy_wrong": 0.25}]
    proxy = {"train_accuracy": [0.8, 0.75], "sfc": sfc,
             "runs": [{"seed": seed, "env": "long", "sfc": s} for seed, s in zip([0, 1], sfc)]}
    folder.mkdir()
    (folder / "matrix.json").write_text(json.dumps(matrix))
    (folder / "sfc.json").write_text(json.dumps({"shortcut_aware": proxy}))
    return folder


def test_matrix_figures_read_an_rm_matrix_folder(tmp_path):
    folder = _matrix_folder(tmp_path / "matrix")
    rows = [line.split(" | ") for line in render("rm-seeds:demo", folder).splitlines()[2:]]
    # o.o.d. = mean of the plain and short cells: standard 40.0 / 50.0, shortcut-aware 60.0 / 57.5
    assert [r[1:4] for r in rows[:2]] == [["40.0", "60.0", "+20.0"], ["50.0", "57.5", "+7.5"]]
    assert [r[4:6] for r in rows[:2]] == [["40.0", "10.0"], ["30.0", "25.0"]]
    assert [r[-1].rstrip(" |") for r in rows] == ["1.50", "1.00", "1.25 ± 0.35"]
    assert rows[2][3] == f"{np.mean([20.0, 7.5]):.1f} ± {np.std([20.0, 7.5], ddof=1):.1f}"
    runs = render("rm-runs:demo", folder).splitlines()[2:]
    assert [line.split(" | ")[-1].rstrip(" |") for line in runs] == ["+20.0", "+7.5"]
    (folder / "sfc.json").unlink()
    with pytest.raises(ConfigError, match="run `robustvlm rm matrix`"):
        render("rm-seeds", folder)


def test_rm_steps_reads_the_shortcut_aware_runs_pairs_and_the_data_cues(tmp_path, monkeypatch):
    folder = _matrix_folder(tmp_path / "matrix")
    data = tmp_path / "data"
    data.mkdir()
    cues = {"a": "on_rejected", "b": "on_chosen", "c": "none"}  # `long`: a's cue fails, b's agrees
    (data / "data.jsonl").write_text("".join(json.dumps({"id": i, "env": "long", "cue": c}) + "\n"
                                             for i, c in cues.items()))
    (folder / "config.resolved.yaml").write_text("base:\n  data: {path: data}\n")
    rows = {0: [("a", 0.8, -1.0), ("b", 0.4, 2.0), ("c", 0.5, 1.0)], 1: [("a", 0.6, 1.0), ("b", 0.2, 1.0)]}
    for seed, pairs in rows.items():
        run = folder / "runs" / "shortcut_aware" / f"seed-{seed}" / "long" / "train"
        run.mkdir(parents=True)
        (run / "sfc_pairs.jsonl").write_text("".join(json.dumps(
            {"step": 3, "id": i, "env": "long", "sfc": w, "main": m, "proxy": 0.0}) + "\n" for i, w, m in pairs))
    monkeypatch.chdir(tmp_path)  # data.path is relative, as `rm matrix` read it
    cells = render("rm-steps:demo", folder).splitlines()[2].strip("| ").split(" | ")
    sigmoid = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    assert cells[:5] == ["1-10", "2", "0.70", "50.0", f"{(sigmoid(-1.0) + sigmoid(1.0)) / 2:.2f}"]
    assert cells[5:] == ["2", "0.30", "100.0", f"{(sigmoid(2.0) + sigmoid(1.0)) / 2:.2f}"]
    (data / "data.jsonl").unlink()
    with pytest.raises(ConfigError, match="rm-steps needs the data"):
        render("rm-steps", folder)


def test_update_replaces_only_the_block(tmp_path, capsys):
    doc = tmp_path / "doc.md"
    doc.write_text("before\n<!-- figure:ladder -->\nold\n<!-- /figure:ladder -->\nafter\n")
    update(doc, "ladder", "| new |")
    assert doc.read_text() == "before\n<!-- figure:ladder -->\n| new |\n<!-- /figure:ladder -->\nafter\n"
    with pytest.raises(ConfigError, match="no <!-- figure:reward-linear"):
        update(doc, "reward-linear", "x")
    assert figures_main([str(doc), f"ladder={tmp_path / 'missing'}"]) == 2
    assert "run `robustvlm demo ladder`" in capsys.readouterr().err


@pytest.mark.parametrize(("name", "drawn_by_the_demo"), [("reward-matrix", "matrix_heatmaps.png"), ("ladder", "ladder.png")])
def test_the_pictures_are_the_demos_own_drawn_again_from_results_json(name, drawn_by_the_demo, quick_runs, tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(f"<!-- figure:{name} -->\n<!-- /figure:{name} -->\n")
    assert figures_main([str(doc), f"{name}={quick_runs[name]}", "--images", str(tmp_path / "images")]) == 0
    drawn = (tmp_path / "images" / f"{name}.png").read_bytes()
    assert drawn == (quick_runs[name] / drawn_by_the_demo).read_bytes()
