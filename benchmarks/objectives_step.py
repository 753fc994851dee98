"""Training-step cost of each objective relative to ERM: step time and peak memory.

One training step = `answer_outputs(model, batch)` -> objective -> backward -> AdamW step, at a
step index past every anneal / warm-up period (all penalties active; Dynamic BIRM past k_skip).
Two environments, half of the batch each.

Workloads (random weights, random token ids; `load_vlm(ModelRef.tiny("idefics3"), ...)`):
- tiny:   the default tiny Idefics3 (vocab 581, 16 image tokens), batch 8, 16 prompt and
          8 answer tokens per example.
- stress: the same architecture with a 32768-token vocabulary and 256 image tokens
          (image_size 256), batch 8, 32 prompt and 32 answer tokens per example.
- smolvlm-head: SmolVLM-2B's LM head alone (hidden 2048, vocabulary 49,152), batch 8 x 256
          answer tokens: random final hidden states (a leaf that receives its gradient, as the
          backbone would) -> logits -> objective -> backward into the head weight and the
          hidden states. No backbone and no optimizer step, so the ratio to ERM is an upper
          bound on the full model's.

Step time: median over `--steps` steps after `--warmup`, all methods interleaved step by step
in one process (one identically initialised model and optimizer per method). On CPU the
ratios use the process's CPU time per step with `--threads` intra-op threads (default 1), which
other jobs on a shared machine disturb far less than wall time (also printed); on CUDA, wall
time.
Peak memory: each method in its own subprocess; the high-water mark of the resident set
(CPU: VmHWM, reset through /proc/self/clear_refs once model and batch are built; CUDA:
max_memory_allocated) minus the memory in use at that point: activations, gradients,
optimizer states and the objective's buffers of `--steps` steps. On CPU the subprocess runs
with MALLOC_MMAP_THRESHOLD_=65536, so glibc maps every buffer of 64 KiB or more on its own
and unmaps it when freed: the resident set then follows the live tensors instead of
whatever the heap happened to keep, and repeated runs agree to within a few MiB.

    python benchmarks/objectives_step.py                      # tiny and stress, CPU
    python benchmarks/objectives_step.py --workload smolvlm-head --methods erm,dynamic_birm
    python benchmarks/objectives_step.py --workload stress --device cuda
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from robustvlm.model_ref import ModelRef
from robustvlm.models.answer import AnswerModel
from robustvlm.models.loading import load_vlm
from robustvlm.models.outputs import AnswerOutputs
from robustvlm.objectives import build_objective

METHODS = ("erm", "irm", "vrex", "groupdro", "birm", "dynamic_birm")
ENVS = ["env0", "env1"]
STEP_INDEX = 10_000  # past DomainBed/BIRM anneal periods and Dynamic BIRM's k_skip
TARGET = 1.10  # dynamic_birm / erm, time and memory
WORKLOADS = {
    "tiny": {"tiny_options": {}, "prompt": 16, "answer": 8, "steps": 40},
    "stress": {
        "tiny_options": {"image_size": 256, "text_vocab_size": 32768},
        "prompt": 32,
        "answer": 32,
        "steps": 10,
    },
    "smolvlm-head": {"head": {"hidden": 2048, "vocab": 49152}, "answer": 256, "steps": 3},
}
DEFAULT_WORKLOADS = ("tiny", "stress")  # the head workload takes minutes on a CPU: on request
FIRST_TEXT_ID = 16  # above the tiny tokenizer's special ids


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--workload", choices=[*WORKLOADS, "all"], default="all", help="all: tiny and stress"
    )
    parser.add_argument(
        "--methods", default=",".join(METHODS), help="comma-separated subset (erm is always run)"
    )
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, help="measured steps (default: 40 tiny, 10 stress)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (CPU)")
    parser.add_argument("--memory-of", choices=METHODS, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


class LMHead(torch.nn.Module):
    """A bias-free LM head whose forward maps a batch of final hidden states to AnswerOutputs."""

    def __init__(self, hidden: int, vocab: int):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(vocab, hidden) / hidden**0.5)

    def forward(self, batch: dict) -> AnswerOutputs:
        return AnswerOutputs(
            logits=batch["hidden"] @ self.weight.T,
            targets=batch["targets"],
            example=batch["example"],
            env=batch["env"],
            hidden=batch["hidden"],
            classifier=self.weight,
        )


def setup_head(spec: dict, method: str, args: argparse.Namespace):
    """(head, None, objective, batch): hidden states [B * answer, hidden] that receive gradients."""
    torch.manual_seed(1)
    head = LMHead(spec["head"]["hidden"], spec["head"]["vocab"]).to(args.device)
    n = args.batch * spec["answer"]
    example = torch.arange(args.batch).repeat_interleave(spec["answer"])
    batch = {
        "hidden": torch.randn(n, spec["head"]["hidden"]),
        "targets": torch.randint(0, spec["head"]["vocab"], (n,)),
        "example": example,
        "env": example % len(ENVS),
    }
    batch = {k: v.to(args.device) for k, v in batch.items()}
    batch["hidden"].requires_grad_()  # a leaf on the device, as the backbone's output would be
    return head, None, build_objective(method, ENVS), batch


def setup(workload: str, method: str, args: argparse.Namespace):
    """(model, optimizer, objective, batch) for one method; identical weights for every method.

    `model(batch)` returns the AnswerOutputs; the optimizer is None where none steps.
    """
    spec = WORKLOADS[workload]
    if "head" in spec:
        return setup_head(spec, method, args)
    model, processor = load_vlm(ModelRef.tiny("idefics3"), tiny_options=spec["tiny_options"])
    model.to(args.device)
    config = model.config
    vocab, side = config.text_config.vocab_size, config.vision_config.image_size
    g = torch.Generator().manual_seed(1)
    B = args.batch

    def text(n: int) -> torch.Tensor:
        return torch.randint(FIRST_TEXT_ID, vocab, (B, n), generator=g)

    image = torch.full((B, processor.image_seq_len), config.image_token_id)
    answer = text(spec["answer"])
    input_ids = torch.cat([text(spec["prompt"] // 2), image, text(spec["prompt"] // 2), answer], 1)
    labels = torch.full_like(input_ids, -100)
    labels[:, -spec["answer"] :] = answer
    batch = {
        "input_ids": input_ids,
        "attention_mask": torch.ones_like(input_ids),
        "pixel_values": torch.randn(B, 1, 3, side, side, generator=g),
        "pixel_attention_mask": torch.ones(B, 1, side, side, dtype=torch.long),
        "labels": labels,
        "env": torch.arange(B) % len(ENVS),
    }
    batch = {k: v.to(args.device) for k, v in batch.items()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return AnswerModel(model), optimizer, build_objective(method, ENVS), batch


def train_step(model, optimizer, objective, batch: dict) -> None:
    parts = objective(model(batch), STEP_INDEX)
    parts.loss.backward()
    if optimizer is not None:
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    else:
        model.zero_grad(set_to_none=True)
        batch["hidden"].grad = None


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def measure_memory(workload: str, args: argparse.Namespace) -> dict:
    """Peak bytes above the post-setup memory during warm-up + measured steps of one method."""
    run = setup(workload, args.memory_of, args)
    synchronize(args.device)
    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = _status_kb("VmRSS") * 1024
        Path("/proc/self/clear_refs").write_text("5")  # high-water mark := now
    for _ in range(args.warmup + args.steps):
        train_step(*run)
    synchronize(args.device)
    peak = (
        torch.cuda.max_memory_allocated() if args.device == "cuda" else _status_kb("VmHWM") * 1024
    )
    return {"extra_bytes": peak - base, "peak_bytes": peak}


def memory_in_subprocess(workload: str, method: str, args: argparse.Namespace) -> dict:
    argv = [
        "--workload",
        workload,
        "--device",
        args.device,
        "--batch",
        str(args.batch),
        "--steps",
        str(args.steps),
        "--warmup",
        str(args.warmup),
        "--threads",
        str(args.threads),
        "--memory-of",
        method,
    ]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    out = subprocess.run(
        [sys.executable, __file__, *argv], check=True, capture_output=True, text=True, env=env
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_time(
    workload: str, methods: list[str], args: argparse.Namespace
) -> dict[str, dict[str, float]]:
    """{method: {"wall": median seconds, "cpu": median process CPU seconds}} per step."""
    runs = {method: setup(workload, method, args) for method in methods}
    times = {method: {"wall": [], "cpu": []} for method in methods}
    for step in range(args.warmup + args.steps):
        for method, run in runs.items():
            synchronize(args.device)
            wall, cpu = time.perf_counter(), time.process_time()
            train_step(*run)
            synchronize(args.device)
            if step >= args.warmup:
                times[method]["wall"].append(time.perf_counter() - wall)
                times[method]["cpu"].append(time.process_time() - cpu)
    return {m: {k: statistics.median(v) for k, v in t.items()} for m, t in times.items()}


def describe(workload: str, args: argparse.Namespace) -> str:
    """One line naming the workload's sizes."""
    spec = WORKLOADS[workload]
    model, _, _, batch = setup(workload, "erm", args)
    logits = tuple(model(batch).logits.shape)
    if "head" in spec:
        sizes = f"LM head {spec['head']['hidden']} x {spec['head']['vocab']}, {spec['answer']} answer tokens/example"
    else:
        config = model.vlm.config
        n_image = int((batch["input_ids"] == config.image_token_id).sum(1)[0])
        sizes = (
            f"vocab {config.text_config.vocab_size}, {batch['input_ids'].shape[1]} tokens/example "
            f"({n_image} image, {spec['answer']} answer)"
        )
    return (
        f"### {workload}: {sizes}, batch {args.batch}, logits {logits}, device {args.device}, "
        f"{torch.get_num_threads()} threads, torch {torch.__version__}"
    )


def report(workload: str, args: argparse.Namespace) -> None:
    spec = WORKLOADS[workload]
    args = argparse.Namespace(**{**vars(args), "steps": args.steps or spec["steps"]})
    asked = [m for m in args.methods.split(",") if m]
    unknown = sorted(set(asked) - set(METHODS))
    if unknown:
        raise SystemExit(f"--methods: unknown {unknown}; choose from {', '.join(METHODS)}")
    methods = ["erm"] + [m for m in asked if m != "erm"]
    print(f"\n{describe(workload, args)}\n")
    memory = {method: memory_in_subprocess(workload, method, args) for method in methods}
    measured = measure_time(workload, methods, args)
    clock = "wall" if args.device == "cuda" else "cpu"
    times = {method: t[clock] for method, t in measured.items()}
    mib = 2**20
    print(
        f"| method | {clock} time / step (median, ms) | wall (ms) | time / ERM "
        "| peak memory above setup (MiB) | memory / ERM |"
    )
    print("|---|---|---|---|---|---|")
    for method in methods:
        t_ratio = times[method] / times["erm"]
        m_ratio = memory[method]["extra_bytes"] / memory["erm"]["extra_bytes"]
        print(
            f"| {method} | {times[method] * 1e3:.1f} | {measured[method]['wall'] * 1e3:.1f} | "
            f"{t_ratio:.2f}x | {memory[method]['extra_bytes'] / mib:.1f} | {m_ratio:.2f}x |"
        )
    if "dynamic_birm" not in methods:
        return
    t_dyn = times["dynamic_birm"] / times["erm"]
    m_dyn = memory["dynamic_birm"]["extra_bytes"] / memory["erm"]["extra_bytes"]
    print(
        f"\ndynamic_birm vs ERM: time {t_dyn:.2f}x, memory {m_dyn:.2f}x "
        f"(target <= {TARGET}x: time {'met' if t_dyn <= TARGET else 'NOT met'}, "
        f"memory {'met' if m_dyn <= TARGET else 'NOT met'})"
    )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: no CUDA device available")
    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    if args.memory_of:
        args.steps = args.steps or WORKLOADS[args.workload]["steps"]
        print(json.dumps(measure_memory(args.workload, args)))
        return
    for workload in DEFAULT_WORKLOADS if args.workload == "all" else [args.workload]:
        report(workload, args)


if __name__ == "__main__":
    main()
