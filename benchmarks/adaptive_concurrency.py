"""Adaptive concurrency (`--concurrency auto`) against fixed settings, on a rate-limited server.

The stub OpenAI-compatible server (tests/helpers/stub_openai_server.py, bound to 127.0.0.1)
answers each chat request after a fixed latency and refuses at once, with HTTP 429, any request
that arrives while `capacity` others are in flight; the client is not told the capacity. The
requests go through `models.served.ServedModel.generate` (the path of `eval`, `mc eval --method
generate`, `icl eval` and `diagnose`), cache off, the default retry policy (5 retries, back-off
from 1 s). Each fixed `--concurrency` of the sweep and `auto` (ceiling 64) run once, one after
the other in this one process, with fresh prompts: requests per second = requests answered /
wall seconds. A fixed setting sends min(--prompts, 40 x concurrency) requests (about 40
round trips at its best rate), auto and the settings at or above the capacity --prompts. It prints a
table, then auto's rate over the best fixed one's and over the default 8's.

The stub stops by itself after --lifetime-s seconds; the prompt counts bound the requests.

    python benchmarks/adaptive_concurrency.py --capacity 12 --latency-ms 100 --prompts 480
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "helpers"))

from stub_openai_server import StubOpenAIServer  # noqa: E402

from robustvlm.config import ServedConfig  # noqa: E402
from robustvlm.model_ref import ModelRef  # noqa: E402
from robustvlm.models.chat import ChatPrompt  # noqa: E402
from robustvlm.models.served import ServedModel, ServedRequestError  # noqa: E402

DEFAULT = 8
AUTO_CEILING = 64
_serial = itertools.count()


def prompts(n: int) -> list[ChatPrompt]:
    """n text prompts never sent before in this process."""
    return [ChatPrompt([{"role": "user", "content": f"question {next(_serial)}"}], record=str(i)) for i in range(n)]


def run(url: str, setting: int | str, n: int) -> dict:
    """One run of n requests at `setting` (a fixed concurrency or "auto")."""
    auto = setting == "auto"
    config = ServedConfig(base_url=url, cache=False, adaptive_concurrency=auto,
                          max_concurrency=AUTO_CEILING if auto else int(setting))
    model = ServedModel(ModelRef.parse("openai:stub"), config)
    start = time.perf_counter()
    try:
        model.generate(prompts(n), max_new_tokens=4)
        failed = 0
    except ServedRequestError as err:
        failed = len(err.failures) + err.n_unsent
    seconds = time.perf_counter() - start
    limit = model.client.limit
    return {"setting": setting, "requests": n, "failed": failed, "seconds": seconds,
            "rate": (n - failed) / seconds, "final_limit": limit.control.allowed if limit else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--capacity", type=int, default=12, help="requests in flight the stub admits")
    parser.add_argument("--latency-ms", type=float, default=100.0, help="the stub's time per admitted request")
    parser.add_argument("--prompts", type=int, default=480, help="requests of auto and of the high fixed settings")
    parser.add_argument("--sweep", default="1,2,4,8,12,16,32", help="fixed --concurrency settings")
    parser.add_argument("--lifetime-s", type=float, default=600.0, help="the stub stops itself after this")
    args = parser.parse_args()
    fixed = [int(c) for c in args.sweep.split(",")]
    rows = []
    with StubOpenAIServer(latency_s=args.latency_ms / 1000, capacity=args.capacity, lifetime_s=args.lifetime_s) as stub:
        for setting in [*fixed, "auto"]:
            n = args.prompts if setting == "auto" else min(args.prompts, 40 * int(setting))
            refused_before = stub.refused
            row = run(stub.url, setting, n)
            row["refused"] = stub.refused - refused_before
            rows.append(row)
            print(f"{str(setting):>6}  {row['requests']:5d} requests  {row['seconds']:6.2f} s  "
                  f"{row['rate']:7.1f} req/s  429s {row['refused']:5d}  failed {row['failed']}"
                  + (f"  limit at the end {row['final_limit']}" if row["final_limit"] else ""), flush=True)
    ideal = args.capacity / (args.latency_ms / 1000)
    answered = [r for r in rows if r["setting"] != "auto" and not r["failed"]]
    best = max(answered, key=lambda r: r["rate"])
    default = next(r for r in rows if r["setting"] == DEFAULT)
    auto = rows[-1]
    print(f"capacity {args.capacity} in flight x {args.latency_ms:g} ms: at most {ideal:.0f} req/s")
    print(f"auto / best fixed (--concurrency {best['setting']}): {auto['rate'] / best['rate']:.3f}")
    print(f"auto / default --concurrency {DEFAULT}: {auto['rate'] / default['rate']:.3f}")


if __name__ == "__main__":
    main()
