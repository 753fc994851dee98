"""`robustvlm.sharding` without a launcher: the blocks Accelerate cuts, `--shard I/N` on every
scoring command joined by `robustvlm merge` into what one run writes, the merge's refusals, and
the folding of part files a killed launch leaves (the launched runs: tests/workflows/test_data_parallel.py)."""

from __future__ import annotations

import io
import json
import os
import shutil

import pytest
import torch
from accelerate import PartialState
from PIL import Image

from robustvlm import sharding
from robustvlm.cli import main
from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef
from robustvlm.multiple_choice.build import MCQuestion, write_questions
from robustvlm.runs import write_jsonl
from robustvlm.sharding import Shard, block, merge_parts, part_path
from robustvlm.workflows.merge import rerun_argv


@pytest.mark.parametrize(("n", "count"), [(0, 3), (1, 2), (7, 2), (10, 4), (5, 5), (3, 7)])
def test_blocks_are_the_ones_accelerate_cuts(n, count, monkeypatch):
    items = list(range(n))
    state = PartialState(cpu=True)  # one process; its split is taken as rank i of `count` below
    blocks = []
    for rank in range(count):
        monkeypatch.setattr(state, "process_index", rank)
        monkeypatch.setattr(state, "num_processes", count)
        with state.split_between_processes(items) as theirs:
            assert Shard(rank, count).take(items) == list(theirs)
        blocks.append(block(n, rank, count))
    assert [i for start, end in blocks for i in range(start, end)] == items  # no gap, no overlap, in order


def test_shard_text_is_checked():
    assert Shard.parse("1/4") == Shard(1, 4) and str(Shard(1, 4)) == "1/4"
    for bad in ("4/4", "1", "-1/2", "a/b", "0/0"):
        with pytest.raises(ConfigError, match="expected I/N"):
            Shard.parse(bad)


def test_cli_rejects_a_bad_shard(capsys):
    with pytest.raises(SystemExit):
        main(["mc", "eval", "--model", "m", "--benchmark", "b", "--out", "o", "--shard", "2/2"])
    assert "expected I/N" in capsys.readouterr().err


def test_parts_fold_in_question_order_after_the_rows_kept(tmp_path):
    path = tmp_path / "bench.jsonl"
    write_jsonl(path, [{"id": "b", "x": 0.1}])
    write_jsonl(part_path(path, 1, 2), [{"id": "e", "x": 1.5}, {"id": "d", "x": 2.0}])
    write_jsonl(part_path(path, 0, 3), [{"id": "c", "x": 1 / 3}, {"id": "b", "x": 9.0}, {"id": "z", "x": 0.0}])
    merge_parts(path, ["a", "b", "c", "d", "e"], lambda r: r["id"])
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert rows == [{"id": "b", "x": 0.1}, {"id": "c", "x": 1 / 3}, {"id": "d", "x": 2.0}, {"id": "e", "x": 1.5},
                    {"id": "z", "x": 0.0}]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench.jsonl"]


def test_rerun_argv_drops_the_shard_and_points_at_the_merge(tmp_path):
    argv = ["mc", "eval", "--shard", "0/2", "--model", "m", "--out", "s0", "--batch-size=4"]
    assert rerun_argv(argv, tmp_path) == ["mc", "eval", "--model", "m", "--out", str(tmp_path), "--batch-size=4",
                                          "--resume"]
    assert rerun_argv(["eval", "--out=x", "--shard=1/3", "--resume"], tmp_path) == ["eval", "--out", str(tmp_path),
                                                                                   "--resume"]


def _png(i: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (32, 32), (40 * i % 256, 90, 255 - 30 * i % 256)).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    classes = ["dog", "cat", "bird"]
    path = tmp_path_factory.mktemp("bench") / "shapes.jsonl"
    write_questions([MCQuestion(id=f"q{i}", image=_png(i), question="", options=classes[i % 3:] + classes[: i % 3],
                                answer=i % 3, source=f"env{i % 2}", dataset_class="x", prompt="What is shown?")
                     for i in range(7)], path, embed_images=True)
    return path


@pytest.fixture(scope="module")
def shards(bench, tmp_path_factory):
    """(one run's folder, the folders of shards 0/3, 1/3, 2/3) of `mc eval` on tiny:clip."""
    root = tmp_path_factory.mktemp("shards")
    argv = ["mc", "eval", "--model", "tiny:clip", "--benchmark", str(bench), "--batch-size", "1"]
    assert main([*argv, "--out", str(root / "one")]) == 0
    for i in range(3):
        assert main([*argv, "--out", str(root / f"s{i}"), "--shard", f"{i}/3"]) == 0
    return root / "one", [root / f"s{i}" for i in range(3)]


def test_shards_merge_into_what_one_run_writes(shards, tmp_path, capsys):
    one, parts = shards
    counts = [len((p / "tiny_clip" / "shapes.jsonl").read_text().splitlines()) for p in parts]
    assert counts == [3, 2, 2]
    assert "shard: 1/3" in (parts[1] / "config.resolved.yaml").read_text()
    out = tmp_path / "merged"
    assert main(["merge", *map(str, reversed(parts)), "--out", str(out)]) == 0
    assert f"merged 3 shards into {out}" in capsys.readouterr().out
    for name in ("config.resolved.yaml", "tiny_clip/shapes.jsonl", "results.csv", "results.json"):
        assert (out / name).read_bytes() == (one / name).read_bytes(), name


def test_merge_refuses_gaps_overlaps_mismatches_and_unfinished_shards(shards, bench, tmp_path, capsys):
    _, parts = shards

    def refused(*folders) -> str:
        assert main(["merge", *map(str, folders), "--out", str(tmp_path / "m")]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and not (tmp_path / "m").exists()
        return err

    assert "missing shards: 1/3" in refused(parts[0], parts[2])
    twin = tmp_path / "twin"
    shutil.copytree(parts[1], twin)
    assert f"overlapping shards: {parts[1]} and {twin} both hold shard 1/3" in refused(*parts, twin)
    assert "not a shard run" in refused(parts[0], bench.parent)
    other = tmp_path / "other"
    assert main(["mc", "eval", "--model", "tiny:clip", "--benchmark", str(bench), "--batch-size", "1", "--sum",
                 "--out", str(other), "--shard", "1/3"]) == 0
    capsys.readouterr()
    assert "settings differ in ['normalize']" in refused(parts[0], other, parts[2])
    cut = tmp_path / "cut"
    shutil.copytree(parts[2], cut)
    rows = cut / "tiny_clip" / "shapes.jsonl"
    rows.write_text(rows.read_text().splitlines(keepends=True)[0])
    assert f"shard 2/3 in {cut} is unfinished: tiny_clip/shapes.jsonl holds 1 of its 2 rows" in refused(
        parts[0], parts[1], cut)


def test_merging_scores_nothing(shards, tmp_path):
    _, parts = shards
    folder = tmp_path / "left"
    shutil.copytree(parts[0], folder)
    with sharding.merging():
        with pytest.raises(ConfigError, match="no row in the merged shards"):
            sharding.score_rows(folder / "x.jsonl", ["a"], key=str, row_key=lambda r: r["id"],
                                score=lambda todo: iter([[{"id": "a"}]]), resume=True)


# ---------------------------------------------------------------- which device a process's models go on


class _FakeState:
    """Stands in for Accelerate's PartialState: records whether it was asked for the CPU backend."""

    def __init__(self, cpu: bool = False):
        self.cpu = cpu
        self.device = torch.device("cpu") if cpu else torch.device("cuda", int(os.environ["LOCAL_RANK"]))


@pytest.fixture
def fresh_state(monkeypatch):
    """`sharding._state` recomputed in the test, with Accelerate's PartialState faked."""
    import accelerate

    sharding._state.cache_clear()
    monkeypatch.setattr(accelerate, "PartialState", _FakeState)
    yield
    sharding._state.cache_clear()


def test_without_a_launcher_models_stay_on_the_cpu(monkeypatch, fresh_state):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert sharding.process_device() is None
    model = torch.nn.Linear(2, 2)
    assert sharding.place_model(model) is model and model.weight.device.type == "cpu"


@pytest.mark.parametrize("cuda", [True, False])
def test_a_launched_process_takes_the_device_accelerate_gives_its_rank(monkeypatch, fresh_state, cuda):
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    assert sharding.process_device() == (torch.device("cuda", 1) if cuda else torch.device("cpu"))
    assert sharding._state().cpu is (not cuda)


def test_load_backend_moves_the_model_onto_the_process_device(monkeypatch):
    """The move itself, checked on the meta device (no GPU here): the model a launched process
    loads ends where `process_device` says; on the CPU the loaded model is left as it is."""
    from robustvlm.models.backends import load_backend

    monkeypatch.setattr(sharding, "process_device", lambda: torch.device("meta"))
    assert {p.device.type for p in load_backend(ModelRef.parse("tiny:clip")).model.parameters()} == {"meta"}
    monkeypatch.setattr(sharding, "process_device", lambda: torch.device("cpu"))
    assert {p.device.type for p in load_backend(ModelRef.parse("tiny:clip")).model.parameters()} == {"cpu"}
