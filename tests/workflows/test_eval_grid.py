"""`robustvlm grid` (workflows.eval_grid): models x benchmarks x shards run through the local
launcher, merged per (model, benchmark) into what one unsharded run writes (its tables and settings
byte for byte; its per-question records value for value, floats to float32 rounding: a shard's
process scores on other threads, whose kernels round the 7th digit otherwise on some CPUs); its
dry run; its resume (finished cells and merges skipped, a lost cell run again); refused configs."""

from __future__ import annotations

import io
import json

import pytest
import yaml
from float_records import same_records
from PIL import Image

from robustvlm.cli import main
from robustvlm.machine import MACHINE_KEY
from robustvlm.multiple_choice.build import MCQuestion, write_questions
from robustvlm.workflows import eval_grid

MODELS = ["tiny:clip", "tiny:siglip"]


def _png(i: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (32, 32), (40 * i % 256, 90, 255 - 30 * i % 256)).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """The grid's cells and merges are robustvlm subprocesses (several seconds each): the tests
    using this fixture are marked slow.

    (root, config path, {model: one unsharded run's folder}) after one grid run of 2 models x
    1 benchmark x 2 shards, run from `root` (the config names the benchmark relative to it)."""
    root = tmp_path_factory.mktemp("grid")
    classes = ["dog", "cat", "bird"]
    write_questions([MCQuestion(id=f"q{i}", image=_png(i), question="", options=classes[i % 3:] + classes[: i % 3],
                                answer=i % 3, source=f"env{i % 2}", dataset_class="x", prompt="What is shown?")
                     for i in range(5)], root / "q" / "shapes.jsonl", embed_images=True)
    config = root / "grid.yaml"
    config.write_text(yaml.safe_dump({"command": "mc eval", "models": MODELS, "benchmarks": ["q/shapes.jsonl"],
                                      "shards": 2, "options": {"batch-size": 1}, "launcher": {"kind": "local"}}))
    one = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        assert main(["grid", str(config), "--out", "out"]) == 0
        for model in MODELS:
            one[model] = root / "one" / model.replace(":", "_")
            assert main(["mc", "eval", "--model", model, "--benchmark", "q/shapes.jsonl", "--batch-size", "1",
                         "--out", str(one[model])]) == 0
    return root, config, one


@pytest.mark.slow
def test_merged_grid_equals_one_unsharded_run_per_cell(grid):
    root, _, one = grid
    summary = json.loads((root / "out" / "grid.json").read_text())
    assert summary == {"tiny_clip": {"shapes": "tiny_clip/shapes/merged"},
                       "tiny_siglip": {"shapes": "tiny_siglip/shapes/merged"}}
    for model in MODELS:
        label = model.replace(":", "_")
        merged = root / "out" / summary[label]["shapes"]
        shards = [root / "out" / label / "shapes" / f"shard-{i}-of-2" for i in range(2)]
        sizes = [len((s / label / "shapes.jsonl").read_text().splitlines()) for s in shards]
        assert sizes == [3, 2]  # each cell scored its own block
        records = f"{label}/shapes.jsonl"
        assert same_records((merged / records).read_text(), (one[model] / records).read_text()), model
        for name in ("results.csv", "config.resolved.yaml"):
            assert (merged / name).read_bytes() == (one[model] / name).read_bytes(), (model, name)
        # results.json also records the machine (thread pools listed in the order a process loaded them)
        assert _results(merged) == _results(one[model])


def _results(folder):
    results = json.loads((folder / "results.json").read_text())
    results.pop(MACHINE_KEY)
    return results


@pytest.mark.slow
def test_dry_run_prints_every_command_and_what_is_done(grid, capsys, monkeypatch):
    root, config, _ = grid
    monkeypatch.chdir(root)
    assert main(["grid", str(config), "--out", "out", "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "2 model(s) x 1 benchmark(s) x 2 shard(s) = 4 cells, then 2 merges; launcher local" in text
    assert "cells: 4 done, 0 to run" in text and "merges: 2 done, 0 to run" in text
    assert (f"done   robustvlm mc eval --model tiny:siglip --benchmark q/shapes.jsonl --out "
            f"{root / 'out' / 'tiny_siglip' / 'shapes' / 'shard-1-of-2'} --shard 1/2 --resume --batch-size 1") in text
    assert main(["grid", str(config), "--out", "fresh", "--dry-run"]) == 0
    assert "cells: 0 done, 4 to run" in capsys.readouterr().out and not (root / "fresh").exists()


@pytest.mark.slow
def test_a_rerun_runs_only_what_is_not_done(grid, monkeypatch):
    root, config, one = grid
    monkeypatch.chdir(root)
    ran: list[str] = []
    real = eval_grid.run_job
    monkeypatch.setattr(eval_grid, "run_job", lambda job: (ran.append(job.name), real(job))[1])
    assert main(["grid", str(config), "--out", "out"]) == 0
    assert ran == []  # every cell and merge finished
    lost = root / "out" / "tiny_clip" / "shapes"
    (lost / "shard-1-of-2.done").unlink()  # as if killed before its marker: its rows are kept (--resume)
    (lost / "merged.done").unlink()
    assert main(["grid", str(config), "--out", "out"]) == 0
    assert ran == ["tiny:clip x shapes shard 1/2", "tiny:clip x shapes merge"]
    merged = lost / "merged" / "results.csv"
    assert merged.read_bytes() == (one["tiny:clip"] / "results.csv").read_bytes()


def test_bad_configs_are_refused_naming_the_file(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def refused(spec: dict) -> str:
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump(spec))
        assert main(["grid", str(path), "--dry-run"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"error: {path}") and "Traceback" not in err, err  # bad keys: a line each
        return err

    base = {"models": ["tiny:clip"], "benchmarks": ["q/a.jsonl"]}
    assert "options: Value error, out: the grid sets these itself" in refused({**base, "options": {"out": "x"}})
    assert "refuses the cells' command line: robustvlm: error: unrecognized arguments: --bogus 1" in refused(
        {**base, "options": {"bogus": 1}})
    assert "share the folder name a" in refused({**base, "benchmarks": ["q/a.jsonl", "r/a.jsonl"]})
    assert "'../up' is not a plain folder name" in refused({**base, "models": {"../up": "tiny:clip"}})
    assert "shards" in refused({**base, "shards": 0})
    assert "command" in refused({**base, "command": "rm eval"})


def test_eval_cells_name_their_data_with_data(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump({"command": "eval", "models": {"erm": "runs/erm/final"},
                                    "benchmarks": {"tasks": "data/tasks"}, "shards": 3,
                                    "options": {"max-new-tokens": 4, "task-rules": True, "blind": False}}))
    plan = eval_grid.grid_plan(path, tmp_path / "g")
    assert [c.argv for c in plan.cells][2] == (
        "eval", "--model", "runs/erm/final", "--data", "data/tasks", "--out", str(tmp_path / "g/erm/tasks/shard-2-of-3"),
        "--shard", "2/3", "--resume", "--max-new-tokens", "4", "--task-rules")
    assert plan.merges[0].argv[-2:] == ("--out", str(tmp_path / "g/erm/tasks/merged"))


def test_a_cell_that_sees_a_gpu_is_launched_onto_it(tmp_path, monkeypatch):
    import sys

    import torch

    cell = eval_grid.Job("m x b shard 0/2", ("mc", "eval", "--model", "m"), tmp_path / "c", tmp_path)
    merge = eval_grid.Job("m x b merge", ("merge", "a", "b", "--out", "c"), tmp_path / "c", tmp_path)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert eval_grid.command_of(cell) == [sys.executable, "-m", "robustvlm.cli", "mc", "eval", "--model", "m"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert eval_grid.command_of(cell) == [sys.executable, "-m", "torch.distributed.run", "--standalone",
                                          "--nproc_per_node", "1", "-m", "robustvlm.cli", "mc", "eval", "--model", "m"]
    assert eval_grid.command_of(merge)[:3] == [sys.executable, "-m", "robustvlm.cli"]  # a merge scores nothing
