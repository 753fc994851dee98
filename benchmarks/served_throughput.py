"""Served-model throughput: concurrent vs sequential requests, and a re-run from the cache.

The stub OpenAI-compatible server (tests/helpers/stub_openai_server.py) answers every chat
request after a fixed latency, standing in for vLLM or an API. N image prompts (64 x 64 PNGs as
data URLs) go through `models.served.ServedModel.generate`, the path of `eval`, `mc eval
--method generate`, `icl eval` and `diagnose`: at concurrency 1 and at concurrency C, cache off,
alternating in this one process (median of R runs each); then twice with the cache on in a
fresh cache folder, counting the requests the second run sends.

    python benchmarks/served_throughput.py --prompts 64 --latency-ms 200 --concurrency 8
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "helpers"))

from stub_openai_server import StubOpenAIServer  # noqa: E402

from robustvlm.config import ServedConfig  # noqa: E402
from robustvlm.model_ref import ModelRef  # noqa: E402
from robustvlm.models.chat import ChatPrompt  # noqa: E402
from robustvlm.models.response_cache import ResponseCache  # noqa: E402
from robustvlm.models.served import ServedModel  # noqa: E402


def prompts(n: int) -> list[ChatPrompt]:
    """n one-image prompts with distinct images and questions."""
    rng = np.random.default_rng(0)
    return [
        ChatPrompt([{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": f"What is shown? ({i})"}]}],
                   [Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8))], record=str(i))
        for i in range(n)
    ]


def timed(url: str, asked: list[ChatPrompt], concurrency: int) -> float:
    """Seconds to answer every prompt with no cache."""
    model = ServedModel(ModelRef.parse("openai:stub"), ServedConfig(base_url=url, max_concurrency=concurrency, cache=False))
    start = time.perf_counter()
    model.generate(asked, max_new_tokens=16)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    asked = prompts(args.prompts)
    times: dict[int, list[float]] = {1: [], args.concurrency: []}
    with StubOpenAIServer(latency_s=args.latency_ms / 1000) as server:
        for _ in range(args.repeats):
            for concurrency in times:
                times[concurrency].append(timed(server.url, asked, concurrency))
        with tempfile.TemporaryDirectory() as folder:
            config = ServedConfig(base_url=server.url, max_concurrency=args.concurrency)
            ServedModel(ModelRef.parse("openai:stub"), config, ResponseCache(folder)).generate(asked, max_new_tokens=16)
            before = server.requests
            rerun = ServedModel(ModelRef.parse("openai:stub"), config, ResponseCache(folder))
            rerun.generate(asked, max_new_tokens=16)
            sent_again = server.requests - before
    sequential, concurrent = (statistics.median(times[c]) for c in times)
    n = args.prompts
    print(f"{n} requests, {args.latency_ms:g} ms stub latency, median of {args.repeats}")
    print(f"concurrency 1:  {sequential:.2f} s  ({n / sequential:.1f} req/s)")
    print(f"concurrency {args.concurrency}:  {concurrent:.2f} s  ({n / concurrent:.1f} req/s)")
    print(f"speed-up: {sequential / concurrent:.2f}x (ideal {args.concurrency}x)")
    print(f"re-run with the cache: {sent_again} requests sent, {rerun.usage['cache_hits']} answers from the cache")


if __name__ == "__main__":
    main()
