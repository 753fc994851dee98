"""Headline costs at real model size (random weights, `real:<name>` models), side by side in one process.

Parts (`--parts`, all by default):
- train: one training step (answer-only logits -> objective -> backward -> AdamW step) of ERM,
  Dynamic BIRM and IRMv1, in LoRA mode with gradient checkpointing off and on, and in full
  mode (every parameter) with checkpointing off; batch `--batch` (two environments, half each),
  one image per example (one crop: 64 image tokens for SmolVLM-256M, 81 for SmolVLM-2.2B, 256
  for Qwen2-VL-2B at 448x448), collated by the training collator (`VLMCollator`). Per mode one
  model and one AdamW; the methods take turns step by step on it (the weights move, the cost
  does not), `--warmup` rounds first. Step time: wall and process CPU seconds, median over
  `--steps` rounds; on CPU the ratios use CPU time, which sharing the machine disturbs less.
  Peak memory: the resident-set high-water mark during the step (VmHWM, reset through
  /proc/self/clear_refs just before it) minus the resident set before it, with glibc mapping
  every buffer of 64 KiB or more on its own (MALLOC_MMAP_THRESHOLD_, set by re-executing) so the
  resident set follows the live tensors; on CUDA, max_memory_allocated minus memory_allocated.
- options: `score_options` of K = 5 options per question with the shared prefix (image +
  question once) vs K full sequences (`shared_prefix=False`), alternating: `--score-warmup`
  untimed rounds of both, then `--repeats` timed rounds; wall and process CPU time (on CPU
  the target is read on CPU time, as for the training steps). On a machine shared with other
  jobs a thread that waits for its descheduled partner at the end of an operation would spin,
  and the spinning counts as CPU time: it fell mostly on the shared way's many small operations
  (batch 1, the continuation step) and lowered the option-scoring speed-up from 4.15x to 2.50x
  in the runs of BENCHMARKS.md. So the re-executed process
  also gets OMP_WAIT_POLICY=PASSIVE (waiting threads sleep; unless set otherwise), and
  `--threads 1` measures the work with no waiting at all (BENCHMARKS.md, "Real-size models on
  CPU").
- reward: `candidate_rewards` of K = 16 responses to one image + query, shared prefix vs K
  full sequences, alternating, likewise.
- generate: greedy generation (`generate_batch`, `--new-tokens` tokens forced with
  min_new_tokens) of 16 text-only prompts at batch 1 and at batch 16, alternating; generated
  tokens/s. Text-only: at batch 1 and 16 the image prefill is the same work, and it would hide
  the decoder's throughput that this part compares (the scoring parts carry image prefills).

    python benchmarks/bench_real.py                       # SmolVLM-256M, CPU, every part
    python benchmarks/bench_real.py --model real:qwen2-vl-2b --device cuda --dtype bfloat16
    python benchmarks/bench_real.py --parts train --modes lora --json out.json
    python benchmarks/bench_real.py --parts options,reward --threads 1   # CPU time without thread waits
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import torch
from PIL import Image
from reward_scoring import QUERY, candidates

from robustvlm.data.collate import VLMCollator
from robustvlm.data.records import Example
from robustvlm.model_ref import REAL, ModelRef
from robustvlm.models.answer import AnswerModel
from robustvlm.models.generate import generate_batch
from robustvlm.models.loading import load_vlm
from robustvlm.models.reward import RewardModel, candidate_rewards
from robustvlm.models.trainable import configure_trainable, enable_gradient_checkpointing
from robustvlm.multiple_choice.build import MCQuestion
from robustvlm.multiple_choice.generative import score_options
from robustvlm.multiple_choice.prompts import GENERATIVE_PROMPTS
from robustvlm.objectives import build_objective

METHODS = ("erm", "dynamic_birm", "irm")
MODES = (("lora", False), ("lora", True), ("full", False))
ENVS = ["env0", "env1"]
STEP_INDEX = 10_000  # past every anneal / warm-up period (Dynamic BIRM past k_skip)
OPTIONS = ["golden retriever", "tabby cat", "red fox", "grey wolf", "brown bear"]
IMAGE_SIDE = {"real:qwen2-vl-2b": 448, "real:smolvlm-2.2b": 384, "real:llava-onevision-0.5b": 384}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
TARGETS = {"time": 1.10, "memory": 1.05, "scoring": 3.0}  # Dynamic BIRM / ERM (LoRA); speed-ups


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="real:smolvlm-256m")
    parser.add_argument("--parts", default="train,options,reward,generate")
    parser.add_argument("--modes", default="lora,lora+ckpt,full", help="of lora, lora+ckpt, full, full+ckpt")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--dtype", default="float32", choices=list(DTYPES))
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=1, help="timed rounds of the scoring and generation parts")
    parser.add_argument("--score-warmup", type=int, default=1, help="untimed rounds of both scoring ways first")
    parser.add_argument("--new-tokens", type=int, default=8)
    parser.add_argument("--gen-batch", type=int, default=16)
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's own, 2 on the 2-core machine)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    return parser.parse_args(argv)


def image_bytes(side: int, seed: int) -> bytes:
    buf = io.BytesIO()
    Image.effect_noise((side, side), 30 + seed).convert("RGB").save(buf, format="PNG")
    return buf.getvalue()


def load(args: argparse.Namespace):
    """(model, processor) of `args.model` (a real-size one with one crop per image) on the
    device, in the dtype."""
    ref = ModelRef.parse(args.model)
    options = {"image_splitting": False, "device": args.device} if ref.kind == REAL else {}
    vlm, processor = load_vlm(ref, dtype=DTYPES[args.dtype], corpus=[QUERY, *OPTIONS, *candidates(16)],
                              tiny_options=options)
    return vlm.to(args.device), processor


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def measured_step(run, device: str) -> tuple[float, float, int]:
    """(wall seconds, process CPU seconds, peak bytes above the memory in use before) of one `run()`."""
    synchronize(device)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = _kib("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")  # high-water mark := now
    start, cpu = time.perf_counter(), time.process_time()
    run()
    synchronize(device)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = torch.cuda.max_memory_allocated() if device == "cuda" else _kib("VmHWM")
    return seconds, cpu, peak - base


def training_batch(processor, args: argparse.Namespace) -> dict:
    side = IMAGE_SIDE.get(args.model, 512)
    examples = [Example(id=f"x{i}", image=image_bytes(side, i), instruction="What animal is in the picture?",
                        target=OPTIONS[i % len(OPTIONS)], env=ENVS[i % 2]) for i in range(args.batch)]
    batch = VLMCollator(processor, {e: i for i, e in enumerate(ENVS)})(examples)
    batch.pop("ids")
    return {k: v.to(args.device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def train_step(model, optimizer, objective, batch: dict) -> None:
    """answer-only logits -> objective -> backward -> optimizer step."""
    objective(model(batch), STEP_INDEX).loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def train_figures(args: argparse.Namespace) -> list[dict]:
    """One row per (mode, checkpointing, method): median step seconds and peak bytes."""
    rows = []
    for mode_name in args.modes.split(","):
        mode, ckpt = mode_name.split("+")[0], mode_name.endswith("+ckpt")
        vlm, processor = load(args)
        model = configure_trainable(vlm, mode=mode)
        if ckpt:
            enable_gradient_checkpointing(model)
        answer_model = AnswerModel(model).train()
        batch = training_batch(processor, args)
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
        objectives = {m: build_objective(m, ENVS) for m in METHODS}
        samples: dict[str, list[tuple[float, float, int]]] = {m: [] for m in METHODS}
        for round_ in range(args.warmup + args.steps):
            for method in METHODS:
                figures = measured_step(partial(train_step, answer_model, optimizer, objectives[method], batch),
                                        args.device)
                if round_ >= args.warmup:
                    samples[method].append(figures)
                print(f"  {mode_name} {method} round {round_}: {figures[0]:.2f} s wall, {figures[1]:.2f} s CPU, "
                      f"{figures[2] / 2**20:.0f} MiB",
                      file=sys.stderr, flush=True)
        n_image = int((batch["input_ids"][0] == image_token_id(vlm)).sum())
        for method in METHODS:
            rows.append({"mode": mode, "checkpointing": ckpt, "method": method,
                         "seconds": statistics.median(s for s, _, _ in samples[method]),
                         "cpu_seconds": statistics.median(c for _, c, _ in samples[method]),
                         "peak_bytes": max(b for _, _, b in samples[method]),
                         "tokens": int(batch["input_ids"].shape[1]), "image_tokens": n_image})
        del vlm, model, answer_model, optimizer
    return rows


def image_token_id(vlm) -> int:
    config = vlm.config
    return int(getattr(config, "image_token_id", None) or config.image_token_index)


def alternate(run, repeats: int, warmup: int) -> dict[str, Any]:
    """Median seconds of run(True) (shared prefix) and run(False), alternating: `warmup` untimed
    rounds of both (a process's first calls pay one-time costs), then `repeats` timed rounds; the
    speed-up and the largest difference of their results."""
    times: dict[bool, list[float]] = {True: [], False: []}
    cpu: dict[bool, list[float]] = {True: [], False: []}
    results: dict[bool, list[float]] = {}
    for round_ in range(warmup + repeats):
        for shared in (True, False):
            start, cpu_start = time.perf_counter(), time.process_time()
            with torch.no_grad():
                results[shared] = list(run(shared))
            if round_ >= warmup:
                times[shared].append(time.perf_counter() - start)
                cpu[shared].append(time.process_time() - cpu_start)
    shared_s, naive_s = statistics.median(times[True]), statistics.median(times[False])
    shared_cpu, naive_cpu = statistics.median(cpu[True]), statistics.median(cpu[False])
    diff = max(abs(a - b) for a, b in zip(results[True], results[False]))
    return {"shared_s": shared_s, "naive_s": naive_s, "speedup": naive_s / shared_s,
            "shared_cpu_s": shared_cpu, "naive_cpu_s": naive_cpu, "cpu_speedup": naive_cpu / shared_cpu,
            "max_abs_diff": diff, "rounds": repeats, "warmup_rounds": warmup}


def option_figures(vlm, processor, args: argparse.Namespace) -> dict:
    side = IMAGE_SIDE.get(args.model, 512)
    question = MCQuestion(id="q", image=image_bytes(side, 0), question="", options=OPTIONS, answer=0,
                          source="bench", dataset_class="x", prompt=GENERATIVE_PROMPTS[1])
    return {"k": len(OPTIONS),
            **alternate(lambda s: score_options(vlm, processor, question, shared_prefix=s).sum, args.repeats,
                      args.score_warmup)}


def reward_figures(vlm, processor, args: argparse.Namespace) -> dict:
    side = IMAGE_SIDE.get(args.model, 512)
    image = Image.open(io.BytesIO(image_bytes(side, 1))).convert("RGB")
    torch.manual_seed(0)
    model = RewardModel(vlm).to(args.device, DTYPES[args.dtype]).eval()
    texts = candidates(16)
    return {"k": len(texts), **alternate(
        lambda s: candidate_rewards(model, processor, QUERY, texts, image=image, shared_prefix=s), args.repeats,
        args.score_warmup)}


def generation_figures(vlm, processor, args: argparse.Namespace) -> dict:
    vlm.generation_config.min_new_tokens = args.new_tokens
    prompts = [f"Describe picture number {i} in one sentence." for i in range(args.gen_batch)]
    examples = [Example(id=f"g{i}", image=None, instruction=p, target="", env=ENVS[0]) for i, p in enumerate(prompts)]
    collate = VLMCollator(processor, {ENVS[0]: 0}, train=False)

    def batches(size: int) -> list[dict]:
        out = []
        for i in range(0, len(examples), size):
            b = collate(examples[i:i + size])
            b.pop("ids")
            out.append({k: v.to(args.device) if isinstance(v, torch.Tensor) else v for k, v in b.items()})
        return out

    prepared = {1: batches(1), args.gen_batch: batches(args.gen_batch)}
    generate_batch(vlm, processor, prepared[1][0], max_new_tokens=2)  # warm-up
    seconds: dict[int, list[float]] = {1: [], args.gen_batch: []}
    for _ in range(args.repeats):
        for size, bs in prepared.items():
            synchronize(args.device)
            start = time.perf_counter()
            for b in bs:
                generate_batch(vlm, processor, b, max_new_tokens=args.new_tokens)
            synchronize(args.device)
            seconds[size].append(time.perf_counter() - start)
    tokens = len(examples) * args.new_tokens
    rates = {size: tokens / statistics.median(s) for size, s in seconds.items()}
    return {"tokens_per_s_b1": rates[1], f"tokens_per_s_b{args.gen_batch}": rates[args.gen_batch],
            "speedup": rates[args.gen_batch] / rates[1], "new_tokens": args.new_tokens, "prompts": len(examples)}


def run_parts(args: argparse.Namespace) -> dict:
    """Every asked part's figures, in one dict (written to `--json` after each part, so a long
    run that is stopped keeps the parts it finished)."""
    parts = args.parts.split(",")
    out: dict[str, Any] = {"model": args.model, "device": args.device, "dtype": args.dtype,
                           "threads": torch.get_num_threads(), "torch": torch.__version__,
                           "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "default")}

    def keep(part: str, figures: Any) -> None:
        out[part] = figures
        if args.json:
            args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")

    if "train" in parts:
        keep("train", train_figures(args))
    if {"options", "reward", "generate"} & set(parts):
        vlm, processor = load(args)
        vlm.eval()
        for part, measure in (("options", option_figures), ("reward", reward_figures),
                              ("generate", generation_figures)):
            if part in parts:
                keep(part, measure(vlm, processor, args))
    return out


def ratio(a: float, b: float) -> str:
    """a / b as "1.234x"; "n/a" where b is not positive (a tiny model's memory delta can be 0)."""
    return f"{a / b:.3f}x" if b > 0 else "n/a"


def markdown(figures: dict) -> str:
    """The figures as markdown tables, ratios against ERM and targets stated met or not."""
    lines = []
    train = figures.get("train", [])
    if train:
        clock = "seconds" if figures["device"] == "cuda" else "cpu_seconds"  # CPU: sharing disturbs CPU time less
        lines += [f"| mode | checkpointing | method | step wall time (s) | step {clock.replace('_', ' ')} | time / ERM "
                  "| peak memory above setup (MiB) | memory / ERM |", "|---|---|---|---|---|---|---|---|"]
        erm = {(r["mode"], r["checkpointing"]): r for r in train if r["method"] == "erm"}
        for r in train:
            base = erm[(r["mode"], r["checkpointing"])]
            lines.append(f"| {r['mode']} | {'on' if r['checkpointing'] else 'off'} | {r['method']} | "
                         f"{r['seconds']:.2f} | {r.get(clock, r['seconds']):.2f} | "
                         f"{r.get(clock, r['seconds']) / base.get(clock, base['seconds']):.3f}x | "
                         f"{r['peak_bytes'] / 2**20:.0f} | {ratio(r['peak_bytes'], base['peak_bytes'])} |")
        for r in train:
            if r["method"] == "dynamic_birm" and r["mode"] == "lora" and not r["checkpointing"]:
                base = erm[("lora", False)]
                t = r.get(clock, r["seconds"]) / base.get(clock, base["seconds"])
                m = r["peak_bytes"] / max(base["peak_bytes"], 1)
                lines.append(f"\nDynamic BIRM / ERM (LoRA, checkpointing off): time {t:.3f}x "
                             f"(target <= {TARGETS['time']}x: {'met' if t <= TARGETS['time'] else 'NOT met'}), "
                             f"memory {m:.3f}x (target <= {TARGETS['memory']}x: "
                             f"{'met' if m <= TARGETS['memory'] else 'NOT met'})")
    for part, unit in (("options", "question"), ("reward", "prompt")):
        if part in figures:
            f = figures[part]
            speedup = f["speedup"] if figures["device"] == "cuda" else f.get("cpu_speedup", f["speedup"])
            lines.append(f"\n{part}: K = {f['k']}, shared prefix {f['shared_s']:.2f} s/{unit}, naive "
                         f"{f['naive_s']:.2f} s/{unit} (wall; speed-up {f['speedup']:.2f}x), CPU-time speed-up "
                         f"{f.get('cpu_speedup', float('nan')):.2f}x (target >= {TARGETS['scoring']}x, on "
                         f"{'wall' if figures['device'] == 'cuda' else 'CPU'} time: "
                         f"{'met' if speedup >= TARGETS['scoring'] else 'NOT met'}); max |difference| "
                         f"{f['max_abs_diff']:.1e}")
    if "generate" in figures:
        f = figures["generate"]
        big = [k for k in f if k.startswith("tokens_per_s_b") and k != "tokens_per_s_b1"][0]
        lines.append(f"\ngeneration: {f['tokens_per_s_b1']:.1f} tokens/s at batch 1, {f[big]:.1f} at batch "
                     f"{big.removeprefix('tokens_per_s_b')} ({f['speedup']:.2f}x)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    if sys.platform == "linux" and "MALLOC_MMAP_THRESHOLD_" not in os.environ:  # see the docstring
        os.execve(sys.executable, [sys.executable, *sys.argv],
                  {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536",
                   "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")})
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: no CUDA device available")
    figures = run_parts(args)
    print(f"model {args.model}, device {args.device}, {args.dtype}, {figures['threads']} threads, "
          f"torch {figures['torch']}, batch {args.batch}")
    print(markdown(figures))


if __name__ == "__main__":
    main()
