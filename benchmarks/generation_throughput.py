"""Batched greedy generation vs batch size 1: examples/s, generated tokens/s and output agreement.

Workload: the test records of the built-in `tasks` benchmark (10 environments, 128x128 images,
taken round-robin over environments so every batch mixes prompt lengths and needs left padding),
collated as `robustvlm eval` collates them (`VLMCollator(train=False)`) and decoded by the
function the eval calls, `generate_batch` (greedy, `--max-new-tokens` 128, repetition penalty
1.15 by default: eval's default when BENCHMARKS.md's figures were measured; eval now uses none), on a tiny random Idefics3 from `load_vlm(ModelRef.tiny("idefics3"))` at `--width` x
`--layers` (`--image-size` 128: 64 image tokens per prompt).

Random weights decide arbitrarily when to stop, so by default every example is made to generate
exactly `--max-new-tokens` tokens (`generation_config.min_new_tokens`, which masks the stop
tokens until then): tokens/s then compares equal work. `--natural-stop` lets the stop tokens
end answers and counts the tokens actually generated per example (up to and including its stop
token); a batch keeps stepping until its longest answer ends, so those runs also report how many
of the computed token rows were useful. A random model rarely emits its stop tokens, so
`--stop-token` adds one it does emit, at varying points, to get answers of varying length.

Timing: one pass = all `--n-examples` examples in chunks of B (batches collated beforehand, not
timed); the batch sizes alternate pass by pass in one process, one warm-up pass each, then
`--repeats` timed passes; medians. Agreement: each example's generated token ids at batch B
against batch 1 (left padding and batched float arithmetic must not change the greedy answer).

    python benchmarks/generation_throughput.py --threads 1
    python benchmarks/generation_throughput.py --threads 1 --natural-stop --stop-token Z
    python benchmarks/generation_throughput.py --device cuda --dtype bfloat16
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from robustvlm.data.collate import VLMCollator
from robustvlm.data.loaders import load_examples
from robustvlm.data.records import Example
from robustvlm.data.synth import synthesize
from robustvlm.model_ref import ModelRef
from robustvlm.models.generate import generate_batch
from robustvlm.models.loading import load_vlm

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
TASKS_TEST_PER_ENV = 0.2  # test records per environment per `n_per_env` of the tasks benchmark


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch-sizes", default="1,4,8,16",
                        help="comma-separated batch sizes; 1 is added if missing (the reference)")
    parser.add_argument("--n-examples", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--repetition-penalty", type=float, default=1.15)
    parser.add_argument("--natural-stop", action="store_true",
                        help="let stop tokens end answers (default: every answer is max-new-tokens long)")
    parser.add_argument("--stop-token", default=None,
                        help="with --natural-stop: also stop on this vocabulary token, one the random "
                             "model emits at varying points, to get answers of varying length")
    parser.add_argument("--width", type=int, default=256, help="text decoder width")
    parser.add_argument("--layers", type=int, default=4, help="text decoder depth")
    parser.add_argument("--image-size", type=int, default=128,
                        help="model input side in pixels (128: 64 image tokens per example)")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per batch size")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: torch's choice); 1 is steadier on a shared machine")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    args = parser.parse_args(argv)
    args.batch_sizes = sorted({1, *(int(b) for b in args.batch_sizes.split(","))})
    if min(args.batch_sizes) < 1 or args.n_examples < 1 or args.max_new_tokens < 1:
        parser.error("batch sizes, --n-examples and --max-new-tokens must be positive")
    if args.stop_token is not None and not args.natural_stop:
        parser.error("--stop-token needs --natural-stop")
    return args


def benchmark_examples(n: int, data_dir: Path) -> list[Example]:
    """`n` test records of the synthetic `tasks` benchmark, round-robin over its environments."""
    envs = 10  # 8 in-domain + 2 OOD environments
    per_env = math.ceil(n / envs)
    synthesize("tasks", data_dir, seed=0, n_per_env=max(10, math.ceil(per_env / TASKS_TEST_PER_ENV)))
    by_env: dict[str, list[Example]] = {}
    for ex in load_examples(data_dir, split="test", verbose=False):
        by_env.setdefault(ex.env, []).append(ex)
    interleaved = [group[i] for i in range(per_env) for group in by_env.values() if i < len(group)]
    return interleaved[:n]


@dataclass
class GenerationLog:
    """What `model.generate` produced per example: new token ids up to and including the stop token.

    `rows` counts the token rows computed (batch size x decoding steps), stopped rows included.
    """

    tokens: list[list[int]] = field(default_factory=list)
    rows: int = 0


def recording_generate(model: torch.nn.Module, log: GenerationLog) -> Callable[..., torch.Tensor]:
    """Wrap `model.generate` so each call appends its new tokens to `log` (outputs unchanged)."""
    generate = model.generate

    def wrapped(*args: Any, **kwargs: Any) -> torch.Tensor:
        out = generate(*args, **kwargs)
        stops = kwargs.get("eos_token_id") or []
        stops = {stops} if isinstance(stops, int) else set(stops)
        new = out[:, kwargs["input_ids"].shape[1]:].tolist()
        log.rows += len(new) * len(new[0])
        for row in new:
            end = next((i + 1 for i, t in enumerate(row) if t in stops), len(row))
            log.tokens.append(row[:end])
        return out

    return wrapped


def add_stop_token(model: torch.nn.Module, tokenizer: Any, token: str) -> None:
    """Make `token` end answers too (generate_batch stops on the model's eos ids)."""
    token_id = tokenizer.convert_tokens_to_ids(token)
    if token_id is None or token_id == tokenizer.unk_token_id:
        sys.exit(f"--stop-token {token!r} is not in the tokenizer's vocabulary")
    eos = model.generation_config.eos_token_id
    model.generation_config.eos_token_id = [*([eos] if isinstance(eos, int) else eos or []), token_id]


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


@dataclass
class Pass:
    """One pass over all examples at one batch size."""

    wall_s: float
    cpu_s: float
    log: GenerationLog


def run_pass(model, processor, batches: list[dict], args: argparse.Namespace) -> Pass:
    """Generate every batch with the eval's `generate_batch`; time the whole pass."""
    log = GenerationLog()
    model.generate = recording_generate(model, log)
    try:
        synchronize(args.device)
        wall, cpu = time.perf_counter(), time.process_time()
        for batch in batches:
            generate_batch(model, processor, batch, max_new_tokens=args.max_new_tokens,
                           repetition_penalty=args.repetition_penalty)
        synchronize(args.device)
        return Pass(time.perf_counter() - wall, time.process_time() - cpu, log)
    finally:
        del model.generate  # back to the class's method


def agreement(reference: GenerationLog, other: GenerationLog) -> tuple[int, list[int]]:
    """(examples with identical new tokens, first differing position of each other example)."""
    same, first_diff = 0, []
    for a, b in zip(reference.tokens, other.tokens, strict=True):
        if a == b:
            same += 1
        else:
            first_diff.append(next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b))))
    return same, first_diff


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: no CUDA device available")
    with tempfile.TemporaryDirectory() as tmp:
        examples = benchmark_examples(args.n_examples, Path(tmp) / "tasks")
        if len(examples) < args.n_examples:
            sys.exit(f"only {len(examples)} test records available, asked for {args.n_examples}")
        corpus = [text for ex in examples for text in (ex.instruction, ex.target)]
        model, processor = load_vlm(ModelRef.tiny("idefics3"), dtype=DTYPES[args.dtype], corpus=corpus,
                                    tiny_options={"hidden_size": args.width, "num_layers": args.layers,
                                                  "image_size": args.image_size})
        model.eval().to(args.device)
        if not args.natural_stop:
            model.generation_config.min_new_tokens = args.max_new_tokens
        if args.stop_token is not None:
            add_stop_token(model, processor.tokenizer, args.stop_token)
        collator = VLMCollator(processor, {}, train=False)
        batches = {b: [collator(examples[i:i + b]) for i in range(0, len(examples), b)]
                   for b in args.batch_sizes}

    prompt_lens = [int(m.sum()) for b in batches[1] for m in b["attention_mask"]]
    padded = {b: sum(x["attention_mask"].numel() for x in bs) / len(examples) for b, bs in batches.items()}
    params = sum(p.numel() for p in model.parameters())
    print(f"model: tiny idefics3 (random), {params / 1e6:.1f}M parameters, width {args.width}, "
          f"{args.layers} layers, vocab {len(processor.tokenizer)}, {args.dtype} on {args.device}; "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"data: {len(examples)} tasks test records, prompts {min(prompt_lens)}-{max(prompt_lens)} "
          f"tokens (mean {statistics.mean(prompt_lens):.1f}, incl. image tokens); padded prompt "
          f"length per example: " + ", ".join(f"B={b} {p:.1f}" for b, p in padded.items()))
    stop = "fixed length" if not args.natural_stop else "natural stop" + (
        f" (+ stop token {args.stop_token!r})" if args.stop_token else "")
    print(f"decoding: greedy, max_new_tokens {args.max_new_tokens}, repetition_penalty "
          f"{args.repetition_penalty}, {stop}")

    passes: dict[int, list[Pass]] = {b: [] for b in args.batch_sizes}
    for _ in range(1 + args.repeats):  # the first pass of each size is a warm-up
        for b in args.batch_sizes:
            passes[b].append(run_pass(model, processor, batches[b], args))
    reference = passes[1][0].log
    lengths = sorted(len(t) for t in reference.tokens)
    print(f"new tokens per example: min {lengths[0]}, median {statistics.median(lengths):g}, "
          f"max {lengths[-1]}")

    print()
    print("| batch | wall s / pass | examples/s | new tokens/s | mean new tokens / example | "
          "useful token rows | speed-up vs batch 1 (wall) | (CPU time) | same tokens as batch 1 |")
    print("|---|---|---|---|---|---|---|---|---|")
    base_wall = statistics.median(p.wall_s for p in passes[1][1:])
    base_cpu = statistics.median(p.cpu_s for p in passes[1][1:])
    for b in args.batch_sizes:
        timed = passes[b][1:]
        wall, cpu = statistics.median(p.wall_s for p in timed), statistics.median(p.cpu_s for p in timed)
        log = passes[b][0].log
        new_tokens = sum(len(t) for t in log.tokens)
        same, first_diff = agreement(reference, log)
        diff_note = f" (first difference at token {sorted(first_diff)})" if first_diff else ""
        print(f"| {b} | {wall:.2f} | {len(examples) / wall:.2f} | {new_tokens / wall:.1f} | "
              f"{new_tokens / len(examples):.1f} | {new_tokens / log.rows:.2f} | "
              f"{base_wall / wall:.2f}x | {base_cpu / cpu:.2f}x | {same}/{len(examples)}{diff_note} |")
    print()
    print("wall s / pass over repeats: " + "; ".join(
        f"B={b}: " + " ".join(f"{p.wall_s:.2f}" for p in passes[b][1:]) for b in args.batch_sizes))


if __name__ == "__main__":
    main()
