"""CEE judge throughput: concurrent vs sequential requests against a stub endpoint.

The stub (tests/helpers/stub_judge_server.py) answers every request after a fixed latency, standing
in for a remote LLM. Both settings run in this one process, alternating, each with a fresh
cache; the figure is the ratio of their median wall times.

    python benchmarks/judge_throughput.py --samples 20 --latency-ms 50 --concurrency 8
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "helpers"))

from stub_judge_server import StubJudgeServer  # noqa: E402

from robustvlm.evaluation.metrics.judge import CEEJudge, JudgeConfig  # noqa: E402
from robustvlm.evaluation.metrics.judge_prompts import PROMPTS  # noqa: E402


def timed_run(url: str, n_samples: int, concurrency: int) -> float:
    """Seconds to judge n_samples (x5 prompts) from an empty cache."""
    config = JudgeConfig(base_url=url, model="stub", max_concurrency=concurrency)
    questions = [f"Question {i}?" for i in range(n_samples)]
    references = [f"answer {i}" for i in range(n_samples)]
    predictions = [f"It is answer {i}." if i % 2 else "No idea." for i in range(n_samples)]
    with tempfile.TemporaryDirectory() as cache:
        start = time.perf_counter()
        CEEJudge(config, cache).score(questions, references, predictions)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    times: dict[int, list[float]] = {1: [], args.concurrency: []}
    with StubJudgeServer(latency_s=args.latency_ms / 1000) as server:
        for _ in range(args.repeats):
            for concurrency in times:
                times[concurrency].append(timed_run(server.url, args.samples, concurrency))
    n_requests = args.samples * len(PROMPTS)
    sequential, concurrent = (statistics.median(times[c]) for c in times)
    print(f"{n_requests} requests, {args.latency_ms:g} ms stub latency, median of {args.repeats}")
    print(f"sequential:     {sequential:.2f} s  ({n_requests / sequential:.1f} req/s)")
    print(f"concurrency {args.concurrency}:  {concurrent:.2f} s  ({n_requests / concurrent:.1f} req/s)")
    print(f"speed-up: {sequential / concurrent:.2f}x (ideal {args.concurrency}x)")


if __name__ == "__main__":
    main()
