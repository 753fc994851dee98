"""Linear unit tests: one cell's models trained together (`linear.batched`) vs one at a time (`fit_linear`).

A cell is every draw x data seed of one example and method at `demo invariance`'s default budget
(8 of the authors' draws x 4 data seeds, 1,000 training rows per environment, 3 environments):
32 models. Both sides train the same 32 models for `--steps` full-batch Adam steps from the same
rows; the sequential side builds each model's objective class and calls `fit_linear` in a loop,
the batched side calls `fit_linear_cell` once. Time: process CPU time with one torch thread,
both sides measured in the same process one after the other, per method. The ratio is
sequential / batched; a sweep's steps scale both sides alike.

    python benchmarks/linear_batched.py
    python benchmarks/linear_batched.py --example Example1 --steps 100
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import torch

from robustvlm.data.synth.linear_unit_tests import EXAMPLES, make_unit_test
from robustvlm.linear.batched import BATCHED, fit_linear_cell
from robustvlm.linear.fit import LinearData, fit_linear
from robustvlm.linear.protocol import draw_config
from robustvlm.objectives import build_objective
from robustvlm.objectives.linear_cell import Cell

DRAWS, SEEDS, ROWS, ENVS = 8, 4, 1000, 3
TARGET = 10.0
"""Sequential / batched CPU time the batched form must reach on every method."""


def cpu_seconds(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def one_at_a_time(method: str, configs: list[dict], data: list[LinearData], env_names: list[str], steps: int) -> None:
    """Train every (draw, data seed) model through the objective classes, one after the other."""
    for draw, config in enumerate(configs):
        for rows in data:
            objective = build_objective(method, env_names, config["method_args"])
            fit_linear(objective, rows, lr=config["lr"], weight_decay=config["weight_decay"], steps=steps, seed=draw)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--example", default="Example2", choices=EXAMPLES)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--methods", default=",".join(BATCHED))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    data, env_names = [], []
    for seed in range(SEEDS):
        problem = make_unit_test(args.example, n_envs=ENVS, seed=seed)
        data.append(LinearData.from_envs(problem.sample("train", ROWS, stream=0), problem.task))
        env_names = problem.env_names
    print(f"{args.example}, {DRAWS} draws x {SEEDS} seeds x {ENVS} environments x {ROWS} rows, "
          f"{args.steps} steps, CPU seconds with 1 torch thread\n")
    print("| method | one at a time (s) | batched (s) | ratio |\n|---|---|---|---|")
    ratios = []
    for method in args.methods.split(","):
        configs = [draw_config(method, d, args.steps) for d in range(DRAWS)]  # anneals inside the run, as in a sweep

        sequential = cpu_seconds(partial(one_at_a_time, method, configs, data, env_names, args.steps))
        together = cpu_seconds(partial(fit_linear_cell, method, Cell.stack(data, ENVS), configs, steps=args.steps,
                                       init_seeds=list(range(DRAWS))))
        ratios.append(sequential / together)
        print(f"| {method} | {sequential:.2f} | {together:.2f} | {ratios[-1]:.1f}x |", flush=True)
    verdict = "met" if min(ratios) >= TARGET else "NOT met"
    print(f"\ntarget: batched at least {TARGET:.0f}x faster on every method: {verdict} (lowest {min(ratios):.1f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
