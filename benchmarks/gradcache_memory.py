"""Gradient-cached InfoNCE vs the plain full-batch loss: peak memory against batch size, and the
time overhead of caching at a batch both can run.

One training step of `embed train` on a VLM embedding model (`EmbeddingModel`, the default
VLM2Vec recipe: LoRA r 16 / alpha 64 / dropout 0.1 on the text decoder, temperature 0.02):
B queries (a random image + "Represent the given image with the following question: ...")
and B target texts are embedded, InfoNCE over the in-batch negatives, backward, AdamW step.

- plain: both sides embedded in one pass with the autograd graph of the whole batch kept.
- cached: `embeddings.gradcache.cached_backward` with `--chunk` rows per pass.

Model: a tiny Idefics3 scaled up so activations dominate (`--width` 256, `--layers` 4,
`--image-size` 128: 64 image tokens, about 100 tokens per query), random weights.

Peak memory: each (mode, batch) in its own subprocess, after one warm-up step (weights, LoRA
optimizer states allocated): the resident-set high-water mark (CPU: VmHWM, reset through
/proc/self/clear_refs; glibc told to unmap every buffer >= 64 KiB on free) during `--steps`
steps minus the resident set before them; CUDA: max_memory_allocated above memory_allocated.
Time: median step time of the two modes interleaved step by step in one process (CPU: process
CPU time with 1 torch thread, which other jobs on a shared machine disturb less; CUDA: wall).

    python benchmarks/gradcache_memory.py                              # CPU, batches 8..128, time at 32
    python benchmarks/gradcache_memory.py --device cuda --batches 32,64,128,256,512 --time-batch 64
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from robustvlm.embeddings.gradcache import cached_backward
from robustvlm.embeddings.loss import info_nce
from robustvlm.models import build_tiny_vlm, configure_trainable
from robustvlm.models.embedding import EmbeddingModel, embedding_collator, query_example, query_text

MODES = ("plain", "cached")
TARGET = 1.4  # cached / plain step time
QUESTIONS = ("What digit is shown?", "Is the digit upright or rotated?", "What colour is the background?")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--batches", default="8,16,32,64,128", help="batch sizes of the memory curve")
    parser.add_argument("--time-batch", type=int, default=32, help="batch of the time comparison")
    parser.add_argument("--chunk", type=int, default=8, help="rows per pass of the gradient cache")
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--image-size", type=int, default=128)
    parser.add_argument("--steps", type=int, default=5, help="measured steps")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--memory-of", help=argparse.SUPPRESS)  # "mode:batch", run in a subprocess
    return parser.parse_args(argv)


def setup(args: argparse.Namespace, batch_size: int):
    """(model, optimizer, queries, targets) with identical weights for every mode."""
    vlm, processor = build_tiny_vlm("idefics3", hidden_size=args.width, num_layers=args.layers,
                                    image_size=args.image_size, vocab_size=600)
    vlm = configure_trainable(vlm, mode="lora", lora={"r": 16, "alpha": 64, "dropout": 0.1})
    model = EmbeddingModel(vlm).to(args.device).train()
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 255, (args.image_size, args.image_size, 3), dtype=np.uint8))
              for _ in range(batch_size)]
    collate = embedding_collator(processor)
    queries = collate([query_example(str(i), img, query_text(QUESTIONS[i % 3])) for i, img in enumerate(images)])
    targets = collate([query_example(str(i), None, f"a handwritten digit number {i}" + " seven" * (i % 4))
                       for i in range(batch_size)])
    move = lambda b: {k: v.to(args.device) if torch.is_tensor(v) else v for k, v in b.items()}  # noqa: E731
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    return model, optimizer, move(queries), move(targets)


def step(mode: str, run, chunk: int) -> float:
    model, optimizer, queries, targets = run
    if mode == "plain":
        loss = info_nce(*model(queries, targets))
        loss.backward()
        value = float(loss.detach())
    else:
        value = cached_backward(model, queries, targets, chunk_size=chunk, loss_fn=info_nce,
                                backward=lambda x: x.backward(), no_sync=nullcontext)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return value


def _status_bytes(field: str) -> int:
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith(field + ":"))
    return int(line.split()[1]) * 1024


def measure_memory(args: argparse.Namespace) -> dict:
    """Peak bytes above the post-warm-up level during `--steps` steps of one (mode, batch)."""
    mode, batch = args.memory_of.split(":")
    run = setup(args, int(batch))
    step(mode, run, args.chunk)  # warm-up: AdamW states, allocator pools
    if args.device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = _status_bytes("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")  # high-water mark := now
    for _ in range(args.steps):
        step(mode, run, args.chunk)
    peak = torch.cuda.max_memory_allocated() if args.device == "cuda" else _status_bytes("VmHWM")
    return {"extra_bytes": peak - base}


def memory_in_subprocess(mode: str, batch: int, args: argparse.Namespace) -> int:
    argv = [sys.executable, __file__, "--memory-of", f"{mode}:{batch}", "--device", args.device,
            "--chunk", str(args.chunk), "--width", str(args.width), "--layers", str(args.layers),
            "--image-size", str(args.image_size), "--steps", str(args.steps), "--threads", str(args.threads)]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    out = subprocess.run(argv, check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])["extra_bytes"]


def measure_time(args: argparse.Namespace) -> dict[str, float]:
    """Median seconds per step of each mode, interleaved, after one warm-up step each."""
    runs = {mode: setup(args, args.time_batch) for mode in MODES}
    losses = {mode: step(mode, run, args.chunk) for mode, run in runs.items()}
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    clock = time.perf_counter if args.device == "cuda" else time.process_time
    for _ in range(args.steps):
        for mode, run in runs.items():
            if args.device == "cuda":
                torch.cuda.synchronize()
            start = clock()
            step(mode, run, args.chunk)
            if args.device == "cuda":
                torch.cuda.synchronize()
            times[mode].append(clock() - start)
    print(f"first-step losses (same weights, different dropout draws): {losses}")
    return {mode: statistics.median(t) for mode, t in times.items()}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    if args.memory_of:
        print(json.dumps(measure_memory(args)))
        return
    batches = [int(b) for b in args.batches.split(",")]
    print(f"device {args.device}, torch {torch.__version__}, {torch.get_num_threads()} threads, width {args.width}, "
          f"{args.layers} layers, {args.image_size}px images, chunk {args.chunk}\n")
    print("| batch | plain peak MiB | cached peak MiB | cached / plain |")
    print("|---|---|---|---|")
    mib = 2**20
    for batch in batches:
        plain, cached = (memory_in_subprocess(mode, batch, args) for mode in MODES)
        print(f"| {batch} | {plain / mib:.0f} | {cached / mib:.0f} | {cached / plain:.2f} |", flush=True)
    times = measure_time(args)
    ratio = times["cached"] / times["plain"]
    print(f"\nstep time at batch {args.time_batch}: plain {1e3 * times['plain']:.0f} ms, cached "
          f"{1e3 * times['cached']:.0f} ms: {ratio:.2f}x (target <= {TARGET}x: {'met' if ratio <= TARGET else 'NOT met'})")


if __name__ == "__main__":
    main()
