"""Data-parallel scoring under torchrun (`robustvlm.sharding`): every scoring command run by two
gloo processes writes the per-question rows and summaries one process writes, and a launch killed
mid-run finishes when relaunched with one process; and the same commands split with `--shard I/N`
into two folders and joined by `robustvlm merge` write what one run writes.

Four torchrun launches in all (about 5 s of start-up each): one runs every command in turn
(tests/helpers/data_parallel_worker.py), three are killed (mc eval, icl eval, diagnose)."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from robustvlm.cli import main
from robustvlm.machine import MACHINE_KEY

WORKER = Path(__file__).resolve().parents[1] / "helpers" / "data_parallel_worker.py"
COMMANDS = ("eval", "mc eval", "icl eval", "diagnose", "rm eval", "embed eval")
#: the commands the kill test stops part-way, each with a per-question file it then compares byte for byte
KILL_FILE = {"mc eval": "tiny_idefics3/clean.jsonl", "icl eval": "blind/icl_predictions.jsonl",
             "diagnose": "icl_predictions.jsonl"}


def torchrun(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", *args]


ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, domains_suite, tasks_data, tiny_vlms):
    """{command: its argv without --out}: tiny models and data of every scoring command."""
    if importlib.util.find_spec("torch.distributed.run") is None or not torch.distributed.is_available():
        pytest.skip("torchrun (torch.distributed.run) is not available")
    from robustvlm.data.loaders import load_examples
    from robustvlm.data.synth import synthesize
    from robustvlm.models import build_tiny_vlm
    from robustvlm.models.embedding import EmbeddingSpec
    from robustvlm.models.reward import RewardModel, save_reward_model
    from robustvlm.multiple_choice import build_questions, write_questions

    root = tmp_path_factory.mktemp("inputs")
    examples = load_examples(domains_suite / "digits", fmt="folder", verbose=False)
    bench = root / "clean.jsonl"
    write_questions(build_questions([ex for ex in examples if ex.env == "clean"], k=3, seed=0,
                                    prompt="What digit is shown?"), bench, embed_images=True)
    vlm, processor = tiny_vlms("idefics3")
    save_reward_model(RewardModel(vlm), processor, root / "rm", meta={"loss": "standard"})
    synthesize("preferences", root / "prefs", seed=1, n_per_env=3)
    model, processor = build_tiny_vlm("idefics3", seed=0, hidden_size=32, vocab_size=300)
    model.save_pretrained(root / "embed")
    processor.save_pretrained(root / "embed")
    EmbeddingSpec(family="vlm2vec-vqa", query_style="question").save(root / "embed")
    descriptions = root / "descriptions.yaml"
    descriptions.write_text("".join(f"{c}: a drawing of a {c}\n" for c in sorted(
        p.name for p in (domains_suite / "shapes" / "photo").iterdir())))
    in_context = ["--model", "tiny:idefics3", "--data", str(domains_suite / "shapes")]
    return {
        "eval": ["eval", "--model", "tiny:idefics3", "--data", str(tasks_data), "--batch-size", "3"],
        "mc eval": ["mc", "eval", "--model", "tiny:idefics3", "--model", "tiny:clip", "--benchmark", str(bench),
                    "--batch-size", "1"],  # CLIP's scores move with the batch's other images: one at a time
        # one prompt a batch, and for diagnose (8 a batch) 12 a process: the kill test finds rows in a part file
        "icl eval": ["icl", "eval", *in_context, "--n-per-env", "2", "--shots", "0,1", "--demos", "random,same-domain",
                     "--batch-size", "1", "--blind"],
        "diagnose": ["diagnose", *in_context, "--n-per-env", "3", "--shots", "1", "--descriptions", str(descriptions)],
        "rm eval": ["rm", "eval", "--model", str(root / "rm"), "--data", str(root / "prefs")],
        "embed eval": ["embed", "eval", "--model", str(root / "embed"), "--benchmark", str(bench)],
    }


@pytest.fixture(scope="module")
def runs(inputs, tmp_path_factory):
    """{command: (one process's folder, two processes' folder)}."""
    root = tmp_path_factory.mktemp("runs")
    folders = {c: (root / "one" / c.replace(" ", "_"), root / "two" / c.replace(" ", "_")) for c in COMMANDS}
    for command, (one, _) in folders.items():
        assert main([*inputs[command], "--out", str(one)]) == 0
    plan = root / "commands.json"
    plan.write_text(json.dumps([[*inputs[c], "--out", str(two)] for c, (_, two) in folders.items()]))
    proc = subprocess.run(torchrun([str(WORKER), str(plan)]), env=ENV, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return folders


def same_values(a, b, where: str) -> None:
    """Equal JSON-like values, floats to 1e-6."""
    if isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-6, abs=1e-6), where
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            same_values(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            same_values(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def per_question_files(folder: Path) -> list[Path]:
    return sorted(p.relative_to(folder) for p in folder.rglob("*.jsonl"))


def _without_machine(results: dict) -> dict:
    """A summary without its machine record (which says how many processes and threads ran)."""
    return {key: value for key, value in results.items() if key != MACHINE_KEY}


def assert_same_run(one: Path, two: Path) -> None:
    """`two` holds the per-question files of `one`, each row byte-identical or equal with floats to
    1e-6, and equal summaries (results.csv, metrics.json, results.json) and settings."""
    files = per_question_files(one)
    assert files and per_question_files(two) == files  # no part file is left
    for rel in files:
        a, b = (p.read_text(encoding="utf-8").splitlines() for p in (one / rel, two / rel))
        assert len(a) == len(b) > 0, rel
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:  # byte-identical, or equal but for float rounding (a batch of other images)
                same_values(json.loads(x), json.loads(y), f"{rel}:{i + 1}")
    for summary in ("results.csv", "metrics.json", "results.json", "icl_results.json", "diagnosis.json",
                    "vision_gain.json"):
        if (one / summary).is_file():
            if summary.endswith(".csv"):
                with (one / summary).open() as f, (two / summary).open() as g:
                    for x, y in zip(csv.DictReader(f), csv.DictReader(g), strict=True):
                        same_values({k: _number(v) for k, v in x.items()}, {k: _number(v) for k, v in y.items()},
                                    summary)
            else:
                same_values(*(_without_machine(json.loads((run / summary).read_text())) for run in (one, two)), summary)
    assert (one / "config.resolved.yaml").read_bytes() == (two / "config.resolved.yaml").read_bytes()


def _number(text: str) -> float | str:
    try:
        return float(text)
    except ValueError:
        return text


@pytest.mark.parametrize("command", COMMANDS)
def test_two_processes_write_what_one_writes(runs, command):
    one, two = runs[command]
    assert_same_run(one, two)
    if command == "mc eval":  # log-likelihood scores one question at a time: the same bytes
        assert (one / "tiny_idefics3" / "clean.jsonl").read_bytes() == (two / "tiny_idefics3" / "clean.jsonl").read_bytes()


@pytest.mark.parametrize("command", KILL_FILE)
def test_a_killed_launch_finishes_with_one_process(runs, inputs, command, tmp_path):
    """SIGKILL the main process of a two-process launch once rows are in its part file; a
    one-process `--resume` keeps them and finishes the run as one process writes it."""
    out = tmp_path / "killed"
    argv = [*inputs[command], "--out", str(out)]
    proc = subprocess.Popen(torchrun(["-m", "robustvlm.cli", *argv]), env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not _rows_in_a_part(out):
        time.sleep(0.02)
    assert proc.poll() is None, "the launch finished before it could be killed"
    main_pid = int((out / "run.lock").read_text().split()[1])
    os.kill(main_pid, signal.SIGKILL)
    proc.wait(timeout=120)
    assert proc.returncode != 0, "the launch finished before it could be killed"
    scored_before = sum(p.read_text().count("\n") for p in out.rglob("*.part-*.jsonl"))
    assert scored_before >= 2
    assert main([*argv, "--resume"]) == 0
    one, _ = runs[command]
    assert_same_run(one, out)
    assert (out / KILL_FILE[command]).read_bytes() == (one / KILL_FILE[command]).read_bytes()


def _rows_in_a_part(out: Path) -> bool:
    """Whether a part file of the main process in `out` holds two rows or more."""
    for part in out.rglob("*.part-0-of-2.jsonl"):
        try:
            if part.read_text().count("\n") >= 2:
                return True
        except FileNotFoundError:  # folded in meanwhile
            continue
    return False


@pytest.fixture(scope="module")
def shards(inputs, tmp_path_factory):
    """shards(command): the folders of `--shard 0/2` and `--shard 1/2` runs of `command`, made once."""
    made: dict[str, list[Path]] = {}

    def get(command: str) -> list[Path]:
        if command not in made:
            root = tmp_path_factory.mktemp("shards")
            made[command] = [root / f"s{i}" for i in range(2)]
            for i, folder in enumerate(made[command]):
                assert main([*inputs[command], "--out", str(folder), "--shard", f"{i}/2"]) == 0
        return made[command]

    return get


@pytest.mark.parametrize("command", COMMANDS)
def test_shards_merged_write_what_one_run_writes(runs, shards, command, tmp_path):
    """`--shard 0/2` and `--shard 1/2` in their own folders, then `robustvlm merge` (no launcher)."""
    assert main(["merge", *map(str, shards(command)), "--out", str(tmp_path / "merged")]) == 0
    one, _ = runs[command]
    assert_same_run(one, tmp_path / "merged")


@pytest.mark.parametrize("command", ("icl eval", "diagnose"))
def test_merge_refuses_gaps_overlaps_and_other_settings(shards, inputs, command, tmp_path, capsys):
    first, second = shards(command)

    def refused(*folders: Path) -> str:
        assert main(["merge", *map(str, folders), "--out", str(tmp_path / "m")]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and not (tmp_path / "m").exists()
        return err

    assert "missing shards: 1/2" in refused(first)
    twin = tmp_path / "twin"
    shutil.copytree(second, twin)
    assert f"overlapping shards: {second} and {twin} both hold shard 1/2" in refused(first, second, twin)
    other = tmp_path / "other"
    assert main([*inputs[command], "--seed", "1", "--out", str(other), "--shard", "1/2"]) == 0
    capsys.readouterr()
    assert "settings differ in ['seed']" in refused(first, other)
