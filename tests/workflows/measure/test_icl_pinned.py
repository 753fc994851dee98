"""One process of `icl eval` and `diagnose` writes what the code before data-parallel scoring
wrote: per-query records, results, reports and vision gain, the settings with
`n_per_domain` now spelled `n_per_env` and the results with the machine record main added since
(`machine.with_machine`). Reports are compared byte for byte, the JSON and JSONL records value
for value with floats to float32 rounding (`float_records`: the pinned files were written on an
Intel Xeon; an AMD EPYC's kernels differ in the 7th digit).

tests/data/fixtures/icl_main/ was written by main at 9f1a98d (before `sharding` took over the
in-context loop), in a folder holding the built-in `domains` data as data/ (seed 0, 3 per env):
    robustvlm icl eval --model tiny:idefics3 --data data/shapes --out icl --shots 0,1
        --demos random,same-domain --n-per-env 2 --batch-size 3 --blind
    robustvlm diagnose --model tiny:idefics3 --data data/shapes --out diag --descriptions desc.yaml
        --shots 1 --n-per-env 2
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from float_records import same_records

from robustvlm.cli import main
from robustvlm.machine import MACHINE_KEY

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "fixtures" / "icl_main"
ICL = ["icl", "eval", "--model", "tiny:idefics3", "--data", "data/shapes", "--out", "icl", "--shots", "0,1",
       "--demos", "random,same-domain", "--n-per-env", "2", "--batch-size", "3", "--blind"]
DIAGNOSE = ["diagnose", "--model", "tiny:idefics3", "--data", "data/shapes", "--out", "diag", "--descriptions",
            "desc.yaml", "--shots", "1", "--n-per-env", "2"]


@pytest.mark.slow
def test_one_process_writes_what_main_wrote(domains_suite, tmp_path, monkeypatch):
    (tmp_path / "data").symlink_to(domains_suite)
    shutil.copy(FIXTURE / "desc.yaml", tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(ICL) == 0
    assert main(DIAGNOSE) == 0
    pinned = sorted(p.relative_to(FIXTURE) for p in FIXTURE.rglob("*") if p.is_file() and p.name != "desc.yaml")
    assert len(pinned) == 11
    for rel in pinned:
        expected = (FIXTURE / rel).read_text(encoding="utf-8").replace("n_per_domain", "n_per_env")
        written = (tmp_path / rel).read_text(encoding="utf-8")
        if rel.name in ("icl_results.json", "diagnosis.json"):
            written = json.dumps({k: v for k, v in json.loads(written).items() if k != MACHINE_KEY}, indent=2)
        if rel.suffix in (".json", ".jsonl"):
            assert same_records(written, expected), rel
        else:
            assert written == expected, rel
