"""Figure blocks say which code measured them, and fail here when that code has changed since.

Every figure block of the Results pages (docs/results/*.md) and BENCHMARKS.md carries a stamp line
(`report.figure_stamps`) recording the hash of the source modules its results depend on
(`report.figure_sources`). When a change touches those modules, the hash no longer matches: either
re-measure the figure (`make figures EXPERIMENT`) or record, in the block, how it was checked
unaffected (`python -m robustvlm.figures DOC NAME --unaffected HOW`).
"""

from __future__ import annotations

import hashlib
import importlib
import re
from functools import cache
from pathlib import Path

import pytest

from robustvlm.figures.registry import FIGURES
from robustvlm.figures.write import main, results_machine
from robustvlm.machine import machine_line
from robustvlm.report.figure_blocks import read_figure, read_stamp, update
from robustvlm.report.figure_sources import (
    EXPERIMENT_SOURCES,
    FIGURE_EXPERIMENT,
    experiment_of,
    hash_modules,
    module_files,
    sources_hash,
)
from robustvlm.report.figure_stamps import Stamp, parse_machine, parse_stamp

ROOT = Path(__file__).resolve().parents[2]
STAMPED = [*sorted((ROOT / "docs" / "results").glob("*.md")), ROOT / "BENCHMARKS.md"]
BLOCK = re.compile(r"<!-- figure:([\w:-]+) -->")


def _blocks() -> list[tuple[Path, str]]:
    """(document, figure name) of every block of a `make figures` figure in the stamped pages."""
    return [(doc, name) for doc in STAMPED for name in BLOCK.findall(doc.read_text(encoding="utf-8"))
            if name.split(":", 1)[0] in FIGURES]


@cache
def _hash(experiment: str) -> str:
    return hash_modules(EXPERIMENT_SOURCES[experiment])


@pytest.mark.parametrize(("doc", "name"), _blocks(), ids=lambda v: v.name if isinstance(v, Path) else v)
def test_every_figure_block_is_stamped_with_the_hash_of_its_code_now(doc, name):
    text = doc.read_text(encoding="utf-8")
    stamp = read_stamp(text, name)
    assert stamp is not None, f"{doc.name}: figure {name} has no stamp line (`python -m robustvlm.figures`)"
    experiment = experiment_of(name)
    if stamp.kind == "pending":  # not measured yet: an empty block naming the experiment that fills it
        assert read_figure(text, name) == "" and stamp.how == experiment, f"{doc.name}: figure {name}"
        return
    assert stamp.code_hash == _hash(experiment), (
        f"{doc.name}: figure {name} was stamped with code hash {stamp.code_hash} (measured at commit "
        f"{stamp.commit}); the code it depends on (report/figure_sources.py, experiment {experiment}) now "
        f"hashes to {_hash(experiment)}. Re-measure it (`make figures {experiment}`) or record how it was "
        f"checked unaffected: python -m robustvlm.figures {doc.relative_to(ROOT)} {name} --unaffected HOW")


def test_every_figure_declares_its_sources_and_each_has_a_makefile_target():
    assert set(FIGURE_EXPERIMENT) == set(FIGURES)
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for experiment, modules in EXPERIMENT_SOURCES.items():
        assert re.search(rf"^figures-{re.escape(experiment)}:", makefile, re.M), experiment
        assert all(module_files(m) for m in modules)


def test_the_hash_is_sha256_of_each_files_path_and_bytes(tmp_path, monkeypatch):
    package = tmp_path / "robustvlm_stamp_probe"
    (package / "inner").mkdir(parents=True)
    files = {"__init__.py": b"", "a.py": b"x = 1\n", "inner/__init__.py": b"", "inner/b.py": b"y = 2\n"}
    for rel, data in files.items():
        (package / rel).write_bytes(data)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    root = module_files("robustvlm")[0].parent.parent
    expected = hashlib.sha256()
    for path in sorted({*module_files("robustvlm.report.figure_sources")}):
        expected.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    assert hash_modules(["robustvlm.report.figure_sources"]) == expected.hexdigest()[:12]
    assert [p.relative_to(package).as_posix() for p in module_files("robustvlm_stamp_probe")] == [
        "__init__.py", "a.py", "inner/__init__.py", "inner/b.py"]
    before = hash_modules(["robustvlm_stamp_probe", "robustvlm_stamp_probe.inner"])  # inner/ counted once
    assert before == hash_modules(["robustvlm_stamp_probe"])
    (package / "inner" / "b.py").write_bytes(b"y = 3\n")
    assert hash_modules(["robustvlm_stamp_probe"]) != before
    assert sources_hash("reward-matrix") == sources_hash("rm-seeds:cue70") != sources_hash("ladder")


@pytest.mark.parametrize("stamp", [
    Stamp("measured", "abc1234", "0123456789ab"),
    Stamp("measured", "abc1234 with uncommitted changes", "0123456789ab"),
    Stamp("checked", "abc1234", "0123456789ab", at="def5678", how="quick figures unchanged"),
    Stamp("not-reverified", "abc1234", "0123456789ab", at="def5678"),
    Stamp("pending", how="zoo-ii"),
])
def test_a_stamp_line_reads_back(stamp):
    assert parse_stamp(stamp.line()) == stamp
    assert parse_stamp("| a | b |") is None


def test_stamps_are_written_by_the_figures_command(tmp_path, monkeypatch, capsys):
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- figure:reward-matrix -->\n| old |\n<!-- /figure:reward-matrix -->\n")
    monkeypatch.setattr("robustvlm.figures.write.current_commit", lambda: "def5678")
    assert main([str(doc), "reward-matrix", "--unaffected", "x"]) == 2
    assert "no stamp" in capsys.readouterr().err
    assert main([str(doc), "reward-matrix", "--measured-at", "abc1234"]) == 0
    text = doc.read_text()
    assert read_figure(text, "reward-matrix") == "| old |"
    assert read_stamp(text, "reward-matrix") == Stamp("not-reverified", "abc1234", sources_hash("reward-matrix"),
                                                      at="def5678")
    assert main([str(doc), "reward-matrix", "--unaffected", "its quick table is unchanged"]) == 0
    assert read_stamp(doc.read_text(), "reward-matrix") == Stamp(
        "checked", "abc1234", sources_hash("reward-matrix"), at="def5678", how="its quick table is unchanged")
    assert main([str(doc), "reward-matrix"]) == 2
    assert "--unaffected, --measured-at or --pending" in capsys.readouterr().err


@pytest.mark.parametrize("stamp", [
    Stamp("measured", "abc1234", "0123456789ab", machine="Made Up CPU, AVX-512, 2 threads, commit abc1234"),
    Stamp("measured", "abc1234", "0123456789ab"),  # machine not recorded
    Stamp("checked", "abc1234", "0123456789ab", at="def5678", how="unchanged", machine="Made Up CPU, AVX2"),
    Stamp("pending", how="zoo-ii"),
])
def test_a_stamp_with_its_machine_line_reads_back_from_a_block(tmp_path, stamp):
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- figure:reward-matrix -->\n| old |\n<!-- /figure:reward-matrix -->\n")
    update(doc, "reward-matrix", "" if stamp.kind == "pending" else "| new |", stamp)
    text = doc.read_text()
    assert read_stamp(text, "reward-matrix") == stamp
    assert read_figure(text, "reward-matrix") == ("" if stamp.kind == "pending" else "| new |")
    machine_lines = [line for line in text.splitlines() if line.startswith("_Machine:")]
    assert len(machine_lines) == (0 if stamp.kind == "pending" else 1)
    assert parse_machine(machine_lines[0]) == stamp.machine if machine_lines else True
    if stamp.kind == "measured" and not stamp.machine:
        assert machine_lines == ["_Machine: not recorded._"]


def test_an_old_block_without_a_machine_line_reads_as_not_recorded_and_keeps_it(tmp_path, monkeypatch):
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- figure:reward-matrix -->\n| old |\n\n_Measured at commit abc1234; code hash 0123456789ab._\n"
                   "<!-- /figure:reward-matrix -->\n")
    assert read_stamp(doc.read_text(), "reward-matrix") == Stamp("measured", "abc1234", "0123456789ab")
    monkeypatch.setattr("robustvlm.figures.write.current_commit", lambda: "def5678")
    assert main([str(doc), "reward-matrix", "--unaffected", "x"]) == 0
    assert "_Machine: not recorded._" in doc.read_text()


def test_a_measured_figure_records_the_machine_of_its_results(tmp_path, monkeypatch):
    record = {"cpu": "Made Up CPU", "vector": ["avx2"], "torch": None, "kernels": "native", "blas": [],
              "versions": {"numpy": "2.4.6"}, "commit": "abc1234"}
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- figure:reward-matrix -->\n<!-- /figure:reward-matrix -->\n")
    monkeypatch.setattr("robustvlm.figures.write.current_commit", lambda: "def5678")
    monkeypatch.setattr("robustvlm.figures.write.load_results", lambda name, folder: {"machine": record})
    monkeypatch.setattr("robustvlm.figures.write.render", lambda name, folder, results: "| t |")
    assert main([str(doc), f"reward-matrix={tmp_path}"]) == 0
    stamp = read_stamp(doc.read_text(), "reward-matrix")
    assert stamp.machine == machine_line(record) == "Made Up CPU, AVX2, native kernels, numpy 2.4.6, commit abc1234"
    grid = {"a": {"machine": record}, "b": {"machine": record}, "c": {"x": 1}}
    assert results_machine("invariance-spread", grid) == machine_line(record)
    other = {**record, "cpu": "Other CPU"}
    assert results_machine("invariance-spread", {**grid, "d": {"machine": other}}) == (
        f"{machine_line(record)}; {machine_line(other)}")
    assert results_machine("diagnose", {"rows": []}) == ""


def test_blocks_of_a_measurement_commands_files_show_the_machine_its_json_result_records(tmp_path):
    import json

    from robustvlm.figures.write import load_results

    record = {"cpu": "Made Up CPU", "vector": ["avx2"], "torch": None, "kernels": "avx2", "blas": [],
              "versions": {"numpy": "2.4.6"}, "commit": "abc1234"}
    icl = tmp_path / "icl"
    icl.mkdir()  # icl eval: the JSONL figures read the machine of the run's icl_results.json
    (icl / "icl_predictions.jsonl").write_text(json.dumps({"id": "q1"}) + "\n")
    (icl / "icl_results.json").write_text(json.dumps({"config": {}, "rows": [], "machine": record}))
    for name in ("icl-gain", "icl-domains"):
        assert results_machine(name, load_results(name, icl)) == machine_line(record), name
    (icl / "icl_results.json").write_text(json.dumps({"config": {}, "rows": []}))  # measured before runs recorded it
    assert results_machine("icl-gain", load_results("icl-gain", icl)) == ""
    matrix = tmp_path / "matrix"
    matrix.mkdir()  # rm matrix: matrix.json's machine, kept apart from the matrix its tables read
    (matrix / "matrix.json").write_text(json.dumps({"labels": ["standard"], "machine": record}))
    (matrix / "sfc.json").write_text(json.dumps({"shortcut_aware": {}}))
    results = load_results("rm-seeds", matrix)
    assert results_machine("rm-seeds", results) == machine_line(record) and "machine" not in results["matrix"]
    (tmp_path / "diagnosis.json").write_text(json.dumps({"rows": [], "machine": record}))
    assert results_machine("diagnose", load_results("diagnose", tmp_path)) == machine_line(record)
