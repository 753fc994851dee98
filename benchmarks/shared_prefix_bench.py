"""What the shared-prefix benchmarks (option scoring, reward scoring) share: the model-size
arguments and tiny model, and timing the two ways side by side."""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from robustvlm.models import build_tiny_vlm


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """--width, --layers, --image-size of the tiny benchmark VLM."""
    parser.add_argument("--width", type=int, default=384, help="text decoder width")
    parser.add_argument("--layers", type=int, default=4, help="text decoder depth")
    parser.add_argument("--image-size", type=int, default=128, help="square image side (px), a multiple of 16")


def bench_vlm(args: argparse.Namespace, corpus: list[str]):
    """(model, processor): a tiny random Idefics3 of the requested size, vision tower width 128."""
    return build_tiny_vlm("idefics3", hidden_size=args.width, num_layers=args.layers, image_size=args.image_size,
                          corpus=corpus, vision_hidden_size=128, vision_intermediate_size=256)


def time_shared_vs_separate(score_all: Callable[[bool], object], repeats: int, per: int) -> dict[str, list[float]]:
    """{"shared": [...], "separate": [...]}: seconds of `score_all(shared_prefix)` per repeat,
    divided by `per` (the prompts it scores); the two run in alternation, so that load on a
    shared machine hits them alike."""
    times: dict[str, list[float]] = {"shared": [], "separate": []}
    for _ in range(repeats):
        for name, shared_prefix in (("shared", True), ("separate", False)):
            start = time.perf_counter()
            score_all(shared_prefix)
            times[name].append((time.perf_counter() - start) / per)
    return times


def print_shared_vs_separate(times: dict[str, list[float]], unit: str, note: str = "") -> None:
    """The median time per `unit` of the "shared" and "separate" ways and the speed-up: ratio of
    the medians, and the median and range of the per-repeat ratios."""
    shared, separate = statistics.median(times["shared"]), statistics.median(times["separate"])
    ratios = [s / f for f, s in zip(times["shared"], times["separate"])]
    print(f"shared prefix : {shared * 1000:.1f} ms/{unit} (median of {len(ratios)})")
    print(f"separate (K x): {separate * 1000:.1f} ms/{unit}")
    print(f"speed-up      : {separate / shared:.2f}x (ratio of medians); per repeat median "
          f"{statistics.median(ratios):.2f}x, range {min(ratios):.2f}-{max(ratios):.2f}x{note}")
