"""`zoo list` reads recipes and member cards only: it must not load (or even import) a model
library (issue 46.8: it took 17 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from robustvlm.models.zoo_recipes import RECIPES, member_dir

ROOT = Path(__file__).resolve().parents[2]
LIST_AND_REPORT_IMPORTS = (
    "import sys, json; from robustvlm.cli import main; code = main(['zoo', 'list']); "
    "print(json.dumps(sorted(m for m in ('torch', 'transformers') if m in sys.modules)))"
)


def test_zoo_list_imports_no_model_library_and_reads_the_cards(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBUSTVLM_CACHE", str(tmp_path))
    first = next(iter(RECIPES.values()))
    folder = member_dir(first)
    folder.mkdir(parents=True)
    (folder / "zoo_member.json").write_text(json.dumps({"heldout_accuracy": 0.4321, "cpu_seconds": 12}))
    done = subprocess.run([sys.executable, "-c", LIST_AND_REPORT_IMPORTS], capture_output=True, text=True,
                          env={**os.environ, "ROBUSTVLM_CACHE": str(tmp_path),
                               "PYTHONPATH": str(ROOT / "src")}, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert json.loads(lines[-1]) == [], "zoo list imported a model library"
    rows = {line.split("\t")[0]: line.split("\t") for line in lines[1:-1]}
    assert set(rows) == {f"zoo:{name}" for name in RECIPES}
    assert rows[f"zoo:{first.name}"][4:7] == ["yes", "0.432", "12"]
    assert all(row[4] == "no" for name, row in rows.items() if name != f"zoo:{first.name}")
