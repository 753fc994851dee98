"""Shortcut-aware reward training against a standard reward model: step time and peak memory.

Four settings run the real training step of `reward.task.RewardTask` (forward, loss, backward
passes, AdamW step) on the same batch of preference pairs from the built-in benchmark, on a tiny
random Idefics3 (text width `--hidden`, `--layers` layers; images resized to `--image-size`):

- standard_lora / shortcut_adapter: LoRA on the decoder; the adapter proxy is a second LoRA
  adapter and head on the same frozen base;
- standard_full / shortcut_copy: the paper's trainable parts (vision frozen; projector, decoder,
  head trained); the copy proxy is a second full model.

The proxy sees each pair without its image (`text_mode: drop`), as the text-only model does.

Step time: median over `--steps` steps after `--warmup`, the four settings interleaved in one
process. Peak memory: each setting in its own subprocess; the resident-set high-water mark
(VmHWM, reset after the warm-up steps) during the measured steps minus the resident set before
the models were built, i.e. weights + gradients + AdamW states + activations (CUDA:
`torch.cuda.max_memory_allocated`). The defaults make weights and optimizer states dominate,
as they do for a multi-billion-parameter backbone; `--image-size 256 --hidden 256` shows an
activation-heavy regime instead.

    python benchmarks/reward_step.py                     # CPU, one thread
    python benchmarks/reward_step.py --device cuda
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from robustvlm.config import RewardConfig, validate_config
from robustvlm.reward.task import RewardTask
from robustvlm.training.loop import make_accelerator
from robustvlm.training.task import SetupContext, StepContext

SETTINGS = {
    "standard_lora": ("standard", "lora", {}),
    "shortcut_adapter": ("shortcut_aware", "lora", {"proxy": "adapter"}),
    "standard_full": ("standard", "paper", {}),
    "shortcut_copy": ("shortcut_aware", "paper", {"proxy": "copy"}),
}
COMPARED = (("shortcut_adapter", "standard_lora", 1.5, 1.3), ("shortcut_copy", "standard_full", None, None))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--pairs", type=int, default=4, help="preference pairs per batch")
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--image-size", type=int, default=128, help="(image_size / 16)^2 image tokens")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--data", help="a built-in preferences benchmark folder (default: synthesised)")
    parser.add_argument("--memory-of", choices=SETTINGS, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def setting_config(name: str, args: argparse.Namespace) -> RewardConfig:
    loss, trainable, loss_args = SETTINGS[name]
    return validate_config({
        "model": {"name": "tiny:idefics3", "trainable": trainable, "lora": {"r": 16},
                  "tiny": {"hidden_size": args.hidden, "num_layers": args.layers, "image_size": args.image_size,
                           "vocab_size": 512}},
        "data": {"path": args.data, "envs": ["long"]},
        "loss": loss, "loss_args": loss_args,
        "train": {"batch_size": args.pairs, "lr": 1e-4, "bf16": False},
    }, name, RewardConfig)


class Setting:
    """One setting's task, models, optimizer and a fixed batch, stepped like the training loop."""

    def __init__(self, name: str, args: argparse.Namespace, work: Path):
        cfg = setting_config(name, args)
        self.task = RewardTask(cfg)
        self.accelerator = make_accelerator(cfg.train, work)
        setup = self.task.setup(SetupContext(work / name, self.accelerator, args.pairs, False))
        self.models = {k: m.to(args.device) for k, m in setup.models.items()}
        params = [p for m in self.models.values() for p in m.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=1e-4)
        batch = setup.collate(list(range(args.pairs)))
        self.batch = {k: v.to(args.device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}

    def step(self) -> None:
        self.task.training_step(self.batch, StepContext(0, self.models, self.accelerator, 1, True))
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def measure_memory(args: argparse.Namespace, work: Path) -> dict:
    """Peak bytes during the measured steps above the process's footprint before the setting's
    models were built (the high-water mark is reset after the warm-up steps, so transient
    allocations of model building do not count)."""
    base = torch.cuda.memory_allocated() if args.device == "cuda" else _status_kb("VmRSS") * 1024
    setting = Setting(args.memory_of, args, work)
    for _ in range(args.warmup):
        setting.step()
    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    else:
        Path("/proc/self/clear_refs").write_text("5")  # reset the high-water mark to now
    for _ in range(args.steps):
        setting.step()
    peak = torch.cuda.max_memory_allocated() if args.device == "cuda" else _status_kb("VmHWM") * 1024
    return {"setting": args.memory_of, "bytes": peak - base}


def memory_in_subprocess(name: str, argv: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, *argv, "--memory-of", name],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_time(args: argparse.Namespace, work: Path) -> dict[str, float]:
    settings = {name: Setting(name, args, work) for name in SETTINGS}
    times: dict[str, list[float]] = {name: [] for name in SETTINGS}
    for step in range(args.warmup + args.steps):
        for name, setting in settings.items():
            if args.device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            setting.step()
            if args.device == "cuda":
                torch.cuda.synchronize()
            if step >= args.warmup:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="rm_bench_") as tmp:
        work = Path(tmp)
        if args.data is None:
            from robustvlm.data.synth import synthesize

            synthesize("preferences", work / "data", seed=0, n_per_env=max(8, args.pairs))
            args.data = str(work / "data")
            argv = [*argv, "--data", args.data]
        if args.memory_of:
            print(json.dumps(measure_memory(args, work)))
            return
        memory = {name: memory_in_subprocess(name, argv)["bytes"] for name in SETTINGS}
        times = measure_time(args, work)
    tokens = (args.image_size // 16) ** 2
    print(f"workload: {args.pairs} pairs/step, tiny idefics3 width {args.hidden} x {args.layers} layers, "
          f"{tokens} image tokens, device {args.device}, torch {torch.__version__}, 1 thread")
    print()
    print("| setting | step time (median, ms) | peak memory (MiB) |")
    print("|---|---|---|")
    for name in SETTINGS:
        print(f"| {name} | {times[name] * 1e3:.0f} | {memory[name] / 2**20:.0f} |")
    print()
    print("| ratio | step time | peak memory | target |")
    print("|---|---|---|---|")
    for other, base, time_target, memory_target in COMPARED:
        target = (f"time <= {time_target}x, memory <= {memory_target}x" if time_target
                  else "(reference: a second full copy)")
        print(f"| {other} / {base} | {times[other] / times[base]:.2f}x | {memory[other] / memory[base]:.2f}x | {target} |")


if __name__ == "__main__":
    main()
