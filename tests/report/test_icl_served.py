"""The local-against-served in-context table (`report.icl_served`) through `figures.write`, against
an independent computation from the same records: accuracies and identical answers counted by
hand, each backend's gain over its 0-shot cell with a numpy paired bootstrap; mismatched runs
refused with one clear error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from paired_reference import bootstrap, parse_interval

from robustvlm.errors import ConfigError, DataError
from robustvlm.figures.write import render
from robustvlm.report.figure_sources import experiment_of
from robustvlm.report.icl_served import icl_served_table

N = 50
CELLS = [(0, "zero-shot"), (1, "random"), (2, "label-shift")]


def _records(right: dict[tuple[int, str], np.ndarray], answers: dict[tuple[int, str], list[str]]) -> list[dict]:
    return [{"shots": k, "policy": p, "id": f"q{i}", "domain": "clean", "target": "coat",
             "answer": answers[(k, p)][i], "correct": bool(right[(k, p)][i]), "demos": []}
            for k, p in CELLS for i in range(N)]


def _write(folder: Path, records: list[dict]) -> None:
    folder.mkdir(parents=True)
    (folder / "icl_predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_the_served_table_reads_each_backends_accuracy_agreement_and_gain(tmp_path):
    rng = np.random.default_rng(3)
    local = {c: rng.random(N) < 0.3 + 0.2 * c[0] for c in CELLS}
    served = {c: v.copy() for c, v in local.items()}
    served[(2, "label-shift")][:5] = ~served[(2, "label-shift")][:5]  # five queries answered otherwise
    names = {c: ["coat" if r else "bag" for r in v] for c, v in local.items()}
    served_names = {c: ["coat" if r else "bag" for r in v] for c, v in served.items()}
    _write(tmp_path / "local", _records(local, names))
    _write(tmp_path / "served", _records(served, served_names))
    table = render("icl-served:member", tmp_path)
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]
    assert [r[0] for r in rows] == ["0, zero-shot", "1, random", "2, label-shift"]
    for row, cell in zip(rows, CELLS, strict=True):
        assert row[1] == str(N)
        assert float(row[2]) == pytest.approx(local[cell].mean(), abs=5e-4)
        assert float(row[3]) == pytest.approx(served[cell].mean(), abs=5e-4)
        assert row[4] == f"{int((local[cell] == served[cell]).sum())}/{N}"
        if cell[0] == 0:
            assert row[5] == row[6] == "—"
            continue
        order = sorted(range(N), key=lambda i: f"q{i}")  # the table pairs the queries in id order
        for side, column in ((local, 5), (served, 6)):
            d = (side[cell].astype(float) - side[(0, "zero-shot")].astype(float))[order]
            mean, lo, hi = parse_interval(row[column])
            assert mean == pytest.approx(d.mean(), abs=5e-4)
            assert (lo, hi) == pytest.approx(bootstrap(d), abs=5e-4)
    assert rows[2][4] == f"{N - 5}/{N}"
    assert experiment_of("icl-served:llava-clip-m-lmfirst") == "zoo-iii"


def test_runs_of_different_queries_or_a_missing_backend_are_refused(tmp_path):
    right = {c: np.ones(N, bool) for c in CELLS}
    names = {c: ["coat"] * N for c in CELLS}
    records = _records(right, names)
    with pytest.raises(DataError, match="different cells or queries"):
        icl_served_table({"local": records, "served": records[:-1]})
    with pytest.raises(DataError, match="none for served"):
        icl_served_table({"local": records, "served": []})
    _write(tmp_path / "local", records)
    with pytest.raises(ConfigError, match="served/icl_predictions.jsonl not found"):
        render("icl-served", tmp_path)
