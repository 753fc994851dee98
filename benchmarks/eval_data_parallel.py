"""Questions per second of `robustvlm mc eval` at real model size: one process against a torchrun
launch of N processes (data-parallel scoring, `robustvlm.sharding`), side by side in one run.

The model is `real:<name>` (a released architecture at its real size, random weights, built
offline; `models.real`), scored by option log-likelihood (K = 5 options, shared prefix) on a
benchmark of `--questions` random 512x512 images written here. Each variant is a fresh run into
its own folder, taken in turns (`--rounds` rounds: 1 process, then N): the one-process run uses
`--threads-one` threads (all cores by default), each of the N processes `--threads-one / N`
(OMP_NUM_THREADS). Measured per run:
- scoring rate: the per-question rows (and part files) are polled every 0.1 s; rows written after
  the first one, divided by the seconds from the first row to the last (so model building and
  process start-up, which every process repeats, do not count);
- wall time of the whole command, and the CPU seconds of its process tree (RUSAGE_CHILDREN).
The per-question rows of the two variants must be equal (floats to 1e-5); the script stops
otherwise.

    python benchmarks/eval_data_parallel.py                              # real:smolvlm-256m, 1 vs 2
    python benchmarks/eval_data_parallel.py --questions 32 --json out.json

With `--launch-one` the one-process run is a torchrun launch too (of one process): a launched
process puts its model on its own device (cuda:LOCAL_RANK where CUDA is, `sharding.place_model`),
so on a GPU machine this measures 1 GPU against N (`benchmarks/gpu_check.py` runs it so, with N
all visible GPUs); on the CPU the two launches compute where the plain run does.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from robustvlm.multiple_choice.build import MCQuestion, write_questions

OPTIONS = ["golden retriever", "tabby cat", "red fox", "grey wolf", "brown bear"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="real:smolvlm-256m")
    parser.add_argument("--questions", type=int, default=24)
    parser.add_argument("--processes", type=int, default=2, help="processes of the launch")
    parser.add_argument("--threads-one", type=int, default=os.cpu_count() or 1,
                        help="threads of the one-process run (each of N processes gets this / N)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--launch-one", action="store_true",
                        help="run the one-process variant under torchrun as well (1 GPU against N on a GPU machine)")
    parser.add_argument("--json", type=Path, help="also write the measurements here")
    return parser.parse_args(argv)


def write_bench(path: Path, n: int) -> None:
    """`n` questions, each a random 512x512 picture and the five OPTIONS (answer i % 5)."""
    rng = np.random.default_rng(0)
    questions = []
    for i in range(n):
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (512, 512, 3), dtype=np.uint8)).save(buf, format="PNG")
        questions.append(MCQuestion(id=f"q{i}", image=buf.getvalue(), question="", options=OPTIONS, answer=i % 5,
                                    source="bench", dataset_class="x", prompt="What is in this photo?"))
    write_questions(questions, path, embed_images=True)


def rows_written(folder: Path) -> int:
    """Rows in every per-question file and part file under `folder` so far."""
    return sum(p.read_bytes().count(b"\n") for p in folder.rglob("*.jsonl"))


def run(command: list[str], out: Path, threads: int) -> dict[str, float]:
    """Run `command` (writing into `out`) and measure it (module doc)."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    first = last = None
    n_first = n_last = 0
    try:
        while proc.poll() is None:
            time.sleep(0.1)
            n = rows_written(out) if out.is_dir() else 0
            if n and first is None:
                first, n_first = time.perf_counter(), n
            if n > n_last:
                last, n_last = time.perf_counter(), n
    finally:  # stopped from outside (the GPU check's budget): the launch and its processes end too
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.returncode:
        sys.exit(f"{' '.join(command)} failed:\n{proc.stderr.read()[-3000:]}")
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - cpu_before.ru_utime) + (after.ru_stime - cpu_before.ru_stime)
    rate = (n_last - n_first) / (last - first) if first is not None and last is not None and last > first else 0.0
    return {"wall_s": wall, "cpu_s": cpu, "scoring_qps": rate, "rows_timed": n_last - n_first}


def per_question_rows(folder: Path) -> list[dict[str, Any]]:
    path = next(p for p in folder.rglob("*.jsonl") if ".part-" not in p.name)
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def check_same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> None:
    """Stop unless the two runs' rows are equal (scores to 1e-5)."""
    assert [(r["id"], r["prediction"]) for r in a] == [(r["id"], r["prediction"]) for r in b], "predictions differ"
    worst = max(abs(x - y) for r, s in zip(a, b) for x, y in zip(r["scores"], s["scores"]))
    assert worst < 1e-5, f"scores differ by {worst}"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    processes = args.processes
    threads_each = max(1, args.threads_one // processes)
    work = Path(tempfile.mkdtemp(prefix="eval_dp_"))
    bench = work / "bench.jsonl"
    write_bench(bench, args.questions)
    cli = ["-m", "robustvlm.cli", "mc", "eval", "--model", args.model, "--benchmark", str(bench), "--batch-size", "1"]
    results: dict[str, list[dict[str, float]]] = {"one": [], "launch": []}
    rows = {}
    for r in range(args.rounds):
        for variant in ("one", "launch"):
            out = work / f"{variant}{r}"
            count = 1 if variant == "one" else processes
            launcher = ([sys.executable] if variant == "one" and not args.launch_one else
                        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(count)])
            threads = args.threads_one if variant == "one" else threads_each
            measured = run([*launcher, *cli, "--out", str(out)], out, threads)
            results[variant].append(measured)
            rows[variant] = per_question_rows(out)
            print(f"round {r} {variant}: {json.dumps({k: round(v, 3) for k, v in measured.items()})}", flush=True)
        check_same(rows["one"], rows["launch"])
    summary = {
        "model": args.model, "questions": args.questions, "processes": processes, "launch_one": args.launch_one,
        "threads_one": args.threads_one,
        "threads_each": threads_each, "rounds": results, "load_average": os.getloadavg(),
        **{f"{variant}_{key}": statistics.median(m[key] for m in ms)
           for variant, ms in results.items() for key in ("scoring_qps", "wall_s", "cpu_s")},
    }
    summary["speedup_scoring"] = summary["launch_scoring_qps"] / summary["one_scoring_qps"]
    summary["speedup_wall"] = summary["one_wall_s"] / summary["launch_wall_s"]
    print(f"{args.model}, {args.questions} questions: 1 process {summary['one_scoring_qps']:.3f} q/s, "
          f"{processes} processes {summary['launch_scoring_qps']:.3f} q/s: {summary['speedup_scoring']:.2f}x "
          f"(whole command {summary['speedup_wall']:.2f}x; load average {os.getloadavg()[0]:.1f})")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


if __name__ == "__main__":
    main()
