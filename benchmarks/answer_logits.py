"""Answer-only logits vs the built-in `labels=` loss: one training step, time and peak memory.

Workload: an image-heavy batch like SmolVLM instruction tuning: batch 8, 256 image tokens and
32 prompt tokens per example, 20 answer tokens, a 32k vocabulary, on a tiny-width Idefics3
(random weights, random token ids: no tokenizer needed). Both paths take one full training step:
forward, cross-entropy over the answer tokens, backward, AdamW step.

- answer: `answer_outputs(model, batch).token_ce().mean()` (LM head on the N answer rows only).
- labels: `model(**inputs, labels=labels).loss` (transformers forms [B, T, V] logits).

Step time: median over `--steps` steps after `--warmup` steps, the two paths interleaved in one
process (two identically initialised models, one optimizer each).
Peak memory: each path in its own subprocess, after a warm-up step (so parameters, batch and
AdamW states are already allocated): the peak during the measured steps minus the memory in use
before them. CUDA: `torch.cuda.max_memory_allocated` after `reset_peak_memory_stats`.
CPU: the process's resident-set high-water mark (VmHWM, reset through /proc/self/clear_refs)
minus its resident set (VmRSS) before the steps.

    python benchmarks/answer_logits.py                 # CPU
    python benchmarks/answer_logits.py --threads 1     # CPU shared with other jobs
    python benchmarks/answer_logits.py --device cuda   # GPU
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from transformers import Idefics3Config, Idefics3ForConditionalGeneration

from robustvlm.models.answer import answer_outputs, model_inputs

PATHS = ("answer", "labels")
IMAGE_TOKEN, FAKE_TOKEN = 3, 4  # reserved ids; text ids are drawn above them
TARGETS = {"memory": 0.6, "time": 1.0}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=32768)
    parser.add_argument("--image-side-tokens", type=int, default=16,
                        help="image tokens per side after pixel shuffle (16 -> 256 image tokens)")
    parser.add_argument("--prompt-tokens", type=int, default=32)
    parser.add_argument("--answer-tokens", type=int, default=20)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: torch's choice); 1 is steadier on a shared machine")
    parser.add_argument("--memory-of", choices=PATHS, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def build_model(args: argparse.Namespace) -> Idefics3ForConditionalGeneration:
    """Tiny-width Idefics3 whose image_seq_len is image_side_tokens^2 (patch 8, scale factor 2)."""
    patch, scale = 8, 2
    config = Idefics3Config(
        text_config=dict(model_type="llama", vocab_size=args.vocab, hidden_size=args.hidden,
                         intermediate_size=2 * args.hidden, num_hidden_layers=args.layers,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=2048,
                         pad_token_id=0),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                           num_attention_heads=2, patch_size=patch,
                           image_size=args.image_side_tokens * scale * patch),
        scale_factor=scale, image_token_id=IMAGE_TOKEN, pad_token_id=0,
    )
    torch.manual_seed(0)
    return Idefics3ForConditionalGeneration(config).to(args.device)


def build_batch(args: argparse.Namespace, image_size: int) -> dict:
    """[prompt/2] <fake> <image>*n <fake> [prompt/2] [answer]; labels on the answer only."""
    g = torch.Generator().manual_seed(1)
    B, half, n_answer = args.batch, args.prompt_tokens // 2, args.answer_tokens

    def text(n):
        return torch.randint(10, args.vocab, (B, n), generator=g)

    image = torch.full((B, args.image_side_tokens**2), IMAGE_TOKEN)
    fake = torch.full((B, 1), FAKE_TOKEN)
    answer = text(n_answer)
    input_ids = torch.cat([text(half), fake, image, fake, text(half), answer], dim=1)
    labels = torch.full_like(input_ids, -100)
    labels[:, -n_answer:] = answer
    batch = {
        "input_ids": input_ids,
        "attention_mask": torch.ones_like(input_ids),
        "pixel_values": torch.randn(B, 1, 3, image_size, image_size, generator=g),
        "pixel_attention_mask": torch.ones(B, 1, image_size, image_size, dtype=torch.long),
        "labels": labels,
        "env": torch.zeros(B, dtype=torch.long),
    }
    return {k: v.to(args.device) for k, v in batch.items()}


def loss_of(path: str, model, batch: dict) -> torch.Tensor:
    if path == "answer":
        return answer_outputs(model, batch).token_ce().mean()
    return model(**model_inputs(batch), labels=batch["labels"]).loss


def train_step(path: str, model, optimizer, batch: dict) -> float:
    loss = loss_of(path, model, batch)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(loss.detach())


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def setup(args: argparse.Namespace):
    model = build_model(args)
    batch = build_batch(args, model.config.vision_config.image_size)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4), batch


# ---- memory: one path per process -----------------------------------------------------------


def _proc_status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def measure_memory(args: argparse.Namespace) -> dict:
    """Peak bytes above the steady state during `args.steps` steps of one path."""
    model, optimizer, batch = setup(args)
    train_step(args.memory_of, model, optimizer, batch)  # allocates AdamW states
    synchronize(args.device)
    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = _proc_status_kb("VmRSS") * 1024
        Path("/proc/self/clear_refs").write_text("5")  # reset the high-water mark to now
    for _ in range(args.steps):
        train_step(args.memory_of, model, optimizer, batch)
    synchronize(args.device)
    if args.device == "cuda":
        peak = torch.cuda.max_memory_allocated()
    else:
        peak = _proc_status_kb("VmHWM") * 1024
    return {"path": args.memory_of, "base_bytes": base, "peak_bytes": peak, "extra_bytes": peak - base}


def memory_in_subprocess(path: str, argv: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, *argv, "--memory-of", path],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---- time: both paths interleaved in this process ---------------------------------------------


def measure_time(args: argparse.Namespace) -> dict[str, list[float]]:
    runs = {path: setup(args) for path in PATHS}
    times: dict[str, list[float]] = {path: [] for path in PATHS}
    for step in range(args.warmup + args.steps):
        for path, (model, optimizer, batch) in runs.items():
            synchronize(args.device)
            start = time.perf_counter()
            train_step(path, model, optimizer, batch)
            synchronize(args.device)
            if step >= args.warmup:
                times[path].append(time.perf_counter() - start)
    return times


def check_same_loss(args: argparse.Namespace) -> float:
    """|answer loss - labels loss| on the same model and batch (both compute the same quantity)."""
    model, _, batch = setup(args)
    with torch.no_grad():
        return abs(float(loss_of("answer", model, batch)) - float(loss_of("labels", model, batch)))


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.memory_of:
        print(json.dumps(measure_memory(args)))
        return
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: no CUDA device available")
    torch.manual_seed(0)
    T = args.prompt_tokens + args.image_side_tokens**2 + 2 + args.answer_tokens
    print(f"workload: batch {args.batch}, {T} tokens/example ({args.image_side_tokens**2} image, "
          f"{args.answer_tokens} answer), vocab {args.vocab}, hidden {args.hidden}, "
          f"{args.layers} layers, device {args.device}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    print(f"|loss(answer) - loss(labels)| = {check_same_loss(args):.2e}")
    memory = {path: memory_in_subprocess(path, argv) for path in PATHS}
    times = {path: statistics.median(ts) for path, ts in measure_time(args).items()}
    mem_ratio = memory["answer"]["extra_bytes"] / memory["labels"]["extra_bytes"]
    time_ratio = times["answer"] / times["labels"]
    mib = 2**20
    print()
    print("| path | step time (median, ms) | peak memory above steady state (MiB) | total peak (MiB) |")
    print("|---|---|---|---|")
    for path in PATHS:
        m = memory[path]
        print(f"| {path} | {times[path] * 1e3:.1f} | {m['extra_bytes'] / mib:.1f} | {m['peak_bytes'] / mib:.1f} |")
    print()
    print("| ratio answer / labels | measured | target | met |")
    print("|---|---|---|---|")
    for name, ratio in (("peak memory", mem_ratio), ("step time", time_ratio)):
        target = TARGETS["memory" if name == "peak memory" else "time"]
        print(f"| {name} | {ratio:.3f} | <= {target} | {'yes' if ratio <= target else 'NO'} |")


if __name__ == "__main__":
    main()
