"""One prepared GPU check: every family works in bf16 on the GPU, and the bench-real figures at real size.

Stages (each recorded with its seconds and status; `gpu_report.json` and `gpu_report.md` in
`--out`):
1. smoke: for every architecture of `tiny_families.VLM_FAMILIES` at tiny size, in the check's dtype on
   the check's device: a training step (answer-only logits, ERM then Dynamic BIRM, AdamW),
   resume (model and optimizer state saved after step 1; step 2 from the saved state must equal
   step 2 taken straight on, bit for bit), eval (greedy generation), mc loglik (K options, shared
   prefix vs K full sequences), rm (K rewards, shared vs full) and embed (query and text
   embeddings, unit norm). A capability `models.support` declares missing is recorded as
   skipped with its reason.
2. data-parallel: `eval_data_parallel.py` (questions per second of `mc eval`, option
   log-likelihood K = 5; float32, the dtype `mc eval` loads) on real-size SmolVLM-256M, one launched process (one GPU) against a
   torchrun launch of one process per visible GPU, side by side; the rows must agree. Figures
   in `data_parallel.json` and the report.
3. bench-real: `bench_real.py`'s parts (training steps of ERM / Dynamic BIRM / IRMv1 in LoRA with
   checkpointing off and on and in full fine-tuning, option scoring K=5, reward scoring K=16,
   generation at batch 1 vs 16) at real size for Qwen2-VL-2B and SmolVLM-2.2B.
4. deepspeed: Accelerate with DeepSpeed ZeRO-2 on one GPU, one LoRA step of real-size
   Qwen2-VL-2B; state saved, step 2 taken, state loaded, step 2 again: bit-exact or not.
   Skipped with the reason when deepspeed is not installed or there is no CUDA.

On CUDA: bf16, real sizes, budget 480 s. Without CUDA, or with `--dry`: the same plan on CPU in
float32 at tiny size (tiny:qwen2_vl and tiny:idefics3 stand in for the real models; the
data-parallel stage launches 1 against 2 CPU processes on 16 questions of tiny:qwen2_vl), budget
180 s. The budget is enforced: a stage that would start after it is skipped ("budget"), and a
stage running past it is stopped (SIGALRM) and recorded as such; the exit status is 1 unless
every stage passed (DeepSpeed may be skipped) within the budget. The report also gives the
process CPU time: on a CPU shared with other jobs the wall time of the dry run depends on the
load, its CPU time much less. Nothing is downloaded.

    python benchmarks/gpu_check.py --out gpu_check          # on a lent GPU
    python benchmarks/gpu_check.py --dry --out gpu_check    # CPU dry run
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS for the resume checks

import bench_real  # noqa: E402  (benchmarks/ is the script's folder)
import eval_data_parallel  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402

from robustvlm.data.collate import VLMCollator  # noqa: E402
from robustvlm.data.records import Example  # noqa: E402
from robustvlm.models import support  # noqa: E402
from robustvlm.models.answer import AnswerModel  # noqa: E402
from robustvlm.models.embedding import Embedder, EmbeddingSpec  # noqa: E402
from robustvlm.models.generate import generate_batch  # noqa: E402
from robustvlm.models.loglik import option_logliks  # noqa: E402
from robustvlm.models.reward import RewardModel, candidate_rewards  # noqa: E402
from robustvlm.models.tiny import build_tiny_vlm  # noqa: E402
from robustvlm.models.tiny_families import VLM_FAMILIES  # noqa: E402
from robustvlm.models.trainable import configure_trainable  # noqa: E402
from robustvlm.objectives import build_objective  # noqa: E402

ENVS = ["env0", "env1"]
OPTIONS = ["red", "green", "blue", "yellow"]
BUDGET_S = {"cuda": 480, "cpu": 180}
REAL = {"cuda": ["real:qwen2-vl-2b", "real:smolvlm-2.2b"], "cpu": ["tiny:qwen2_vl", "tiny:idefics3"]}
DEEPSPEED_MODEL = {"cuda": "real:qwen2-vl-2b", "cpu": "tiny:qwen2_vl"}


class OverBudget(BaseException):
    """Raised by the alarm when the budget runs out during a stage. A BaseException, as
    KeyboardInterrupt is, so that library code's `except Exception` cannot turn it into another
    error (jinja2 re-raises whatever interrupts its lexer as a TemplateSyntaxError)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("gpu_check"))
    parser.add_argument("--dry", action="store_true", help="the CPU plan at tiny size even where CUDA is present")
    parser.add_argument("--budget", type=float, help="seconds (default 480 on CUDA, 180 dry)")
    return parser.parse_args(argv)


def png(seed: int, side: int = 64) -> bytes:
    buf = io.BytesIO()
    Image.effect_noise((side, side), 40 + seed).convert("RGB").save(buf, format="PNG")
    return buf.getvalue()


def to(batch: dict, device: str) -> dict:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items() if k != "ids"}


# ---- stage 1: the conformance smoke test of one family -----------------------------------------

def smoke_family(kind: str, device: str, dtype: torch.dtype) -> dict[str, Any]:
    """{capability: "ok" | "skipped: <reason>" | figures} for one tiny architecture."""
    corpus = ["What colour is the shape?", *OPTIONS, "Describe the image."]
    vlm, processor = build_tiny_vlm(kind, corpus=corpus, hidden_size=32, vocab_size=320)
    vlm = vlm.to(device, dtype)
    examples = [Example(id=f"x{i}", image=png(i), instruction="What colour is the shape?", target=OPTIONS[i % 4],
                        env=ENVS[i % 2]) for i in range(2)]
    batch = to(VLMCollator(processor, {e: i for i, e in enumerate(ENVS)})(examples), device)
    result: dict[str, Any] = {"train": train_and_resume(vlm, batch)}
    vlm.eval()
    image = Image.open(io.BytesIO(png(0))).convert("RGB")
    prompt = to(VLMCollator(processor, {}, train=False)(examples[:2]), device)
    with torch.no_grad():
        replies = generate_batch(vlm, processor, prompt, max_new_tokens=2)
        result["eval"] = f"ok ({len(replies)} replies)"
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Which colour?"}]}]
        shared = option_logliks(vlm, processor, messages, OPTIONS, images=[image])
        naive = option_logliks(vlm, processor, messages, OPTIONS, images=[image], shared_prefix=False)
        result["mc-loglik"] = agreement(shared.sum, naive.sum)
        if support.supports(kind, "rm"):
            reward = RewardModel(vlm).to(device, dtype).eval()
            shared_r = candidate_rewards(reward, processor, "Describe the image.", OPTIONS, image=image)
            naive_r = candidate_rewards(reward, processor, "Describe the image.", OPTIONS, image=image,
                                        shared_prefix=False)
            result["rm"] = agreement(shared_r, naive_r)
        else:
            result["rm"] = f"skipped: {support.NOT_SUPPORTED[kind]['rm']}"
        if support.supports(kind, "embed"):
            embedder = Embedder(vlm, processor, EmbeddingSpec.for_family("vlm2vec-vqa"), batch_size=2)
            vectors = np.concatenate([embedder.queries([image, image], ["Which colour?", None]),
                                      embedder.texts(OPTIONS[:2])])
            norms = np.linalg.norm(vectors, axis=1)
            result["embed"] = "ok" if np.allclose(norms, 1, atol=1e-2) else f"FAILED: norms {norms.tolist()}"
        else:
            result["embed"] = f"skipped: {support.NOT_SUPPORTED[kind]['embed']}"
    return result


def agreement(shared: list[float], naive: list[float]) -> str:
    diff = max(abs(a - b) for a, b in zip(shared, naive))
    scale = max(1.0, *(abs(b) for b in naive))
    return f"ok (max |shared - naive| {diff:.1e})" if diff <= 0.05 * scale else f"FAILED: shared vs naive {diff:.2e}"


def train_and_resume(vlm, batch: dict) -> str:
    """ERM step, Dynamic BIRM step; then resume: model, optimizer, objective and RNG state after
    step 1 saved, step 2 taken, the state loaded into a fresh copy, step 2 again: equal bit for bit."""
    model = AnswerModel(configure_trainable(vlm, mode="full")).train()
    fresh = copy.deepcopy(model)
    erm, birm = build_objective("erm", ENVS), build_objective("dynamic_birm", ENVS)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step(m, opt, objective, index: int) -> float:
        loss = objective(m(batch), index).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    losses = [step(model, optimizer, erm, 10_000)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "state.pt"
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "objective": birm.state_dict(), "rng": torch.get_rng_state()}, path)
        losses.append(step(model, optimizer, birm, 10_001))
        saved = torch.load(path, weights_only=False)  # our own file: an objective state holds plain Python values
    fresh.load_state_dict(saved["model"])
    fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=1e-3)
    fresh_opt.load_state_dict(saved["optimizer"])
    resumed = build_objective("dynamic_birm", ENVS)
    resumed.load_state_dict(saved["objective"])
    torch.set_rng_state(saved["rng"])
    step(fresh, fresh_opt, resumed, 10_001)
    if not all(np.isfinite(losses)):
        return f"FAILED: losses {losses}"
    pairs = zip(model.state_dict().values(), fresh.state_dict().values())
    if not all(torch.equal(a, b) for a, b in pairs):
        return "FAILED: the resumed step differs from the straight one"
    return f"ok (losses {losses[0]:.3f}, {losses[1]:.3f}; resume bit-exact)"


# ---- stage 2: data-parallel scoring, 1 GPU against all --------------------------------------------

DATA_PARALLEL = {"cuda": {"model": "real:smolvlm-256m", "questions": 96},
                 "cpu": {"model": "tiny:qwen2_vl", "questions": 16}}


def data_parallel_check(device: str, out: Path) -> dict[str, Any]:
    """`mc eval` questions per second: one launched process against one per GPU (2 CPU
    processes in the dry run), `eval_data_parallel.main` with `--launch-one`."""
    processes = torch.cuda.device_count() if device == "cuda" else 2
    spec = DATA_PARALLEL[device]
    argv = ["--model", spec["model"], "--questions", str(spec["questions"]), "--processes", str(processes),
            "--launch-one", "--json", str(out / "data_parallel.json")]
    if device == "cpu":
        argv += ["--threads-one", "2"]
    try:
        summary = eval_data_parallel.main(argv)
    except SystemExit as exc:  # the script stops a failed launch with its stderr
        return {"data-parallel": f"FAILED: {str(exc)[-500:]}"}
    return {"model": spec["model"], "questions": spec["questions"], "processes": processes,
            "one_qps": round(summary["one_scoring_qps"], 3), "all_qps": round(summary["launch_scoring_qps"], 3),
            "ratio": round(summary["speedup_scoring"], 2), "ratio_whole_command": round(summary["speedup_wall"], 2)}


# ---- stage 4: DeepSpeed ZeRO-2 ------------------------------------------------------------------

def deepspeed_check(name: str, device: str) -> str:
    """A LoRA step under Accelerate + DeepSpeed ZeRO-2 on one GPU, save/resume bit-exact.

    Not yet run anywhere: no machine this was written on had deepspeed and a GPU."""
    try:
        import deepspeed  # noqa: F401
    except ImportError:
        return "skipped: deepspeed is not installed (pip install deepspeed on the GPU machine)"
    if device != "cuda":
        return "skipped: DeepSpeed ZeRO-2 needs CUDA"
    from accelerate import Accelerator, DeepSpeedPlugin

    for key, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": "29517"}.items():
        os.environ.setdefault(key, value)
    plugin = DeepSpeedPlugin(zero_stage=2, gradient_accumulation_steps=1)
    plugin.deepspeed_config["train_micro_batch_size_per_gpu"] = 2  # no dataloader to infer it from
    accelerator = Accelerator(deepspeed_plugin=plugin, mixed_precision="bf16")
    args = argparse.Namespace(model=name, device="cuda", dtype="bfloat16", batch=2)
    vlm, processor = bench_real.load(args)
    model = AnswerModel(configure_trainable(vlm, mode="lora"))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    model, optimizer = accelerator.prepare(model, optimizer)
    batch = bench_real.training_batch(processor, args)
    erm = build_objective("erm", ENVS)

    def step() -> None:
        accelerator.backward(erm(model(batch), 10_000).loss)
        optimizer.step()
        optimizer.zero_grad()

    def trainable() -> list[torch.Tensor]:
        return [p.detach().clone() for p in accelerator.unwrap_model(model).parameters() if p.requires_grad]

    step()
    with tempfile.TemporaryDirectory() as tmp:
        accelerator.save_state(tmp)
        step()
        straight = trainable()
        accelerator.load_state(tmp)
        step()
    resumed = trainable()
    exact = all(torch.equal(a, b) for a, b in zip(straight, resumed))
    return "ok (resume bit-exact)" if exact else "FAILED: resumed step differs from the straight one"


# ---- the plan -----------------------------------------------------------------------------------

def bench_args(name: str, device: str, out: Path) -> argparse.Namespace:
    dry = device == "cpu"
    return bench_real.parse_args([
        "--model", name, "--device", device, "--dtype", "float32" if dry else "bfloat16",
        "--parts", "train,options,reward,generate", "--modes", "lora,lora+ckpt,full",
        "--steps", "1" if dry else "3", "--warmup", "1", "--repeats", "1" if dry else "3",
        "--new-tokens", "4" if dry else "16", "--gen-batch", "4" if dry else "16",
        "--json", str(out / f"bench_{name.replace(':', '_')}.json"),
    ])


def plan(device: str, out: Path) -> list[tuple[str, Any]]:
    """(stage name, thunk) in order."""
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    stages: list[tuple[str, Any]] = [(f"smoke {kind}", lambda k=kind: smoke_family(k, device, dtype))
                                     for kind in VLM_FAMILIES]
    stages.append(("data-parallel mc eval", lambda: data_parallel_check(device, out)))
    stages += [(f"bench-real {name}", lambda n=name: bench_real.run_parts(bench_args(n, device, out)))
               for name in REAL[device]]
    stages.append(("deepspeed zero-2", lambda: deepspeed_check(DEEPSPEED_MODEL[device], device)))
    return stages


@contextlib.contextmanager
def alarm(seconds: float):
    """Raise OverBudget in the block once `seconds` have passed (main thread, POSIX)."""
    def ring(signum, frame):
        raise OverBudget()
    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_plan(device: str, budget: float, out: Path) -> dict[str, Any]:
    start, cpu = time.perf_counter(), time.process_time()
    stages = []
    for name, thunk in plan(device, out):
        left = budget - (time.perf_counter() - start)
        entry: dict[str, Any] = {"stage": name}
        if left <= 0:
            entry.update(status="skipped: budget", seconds=0.0)
        else:
            t0 = time.perf_counter()
            try:
                with alarm(left):
                    entry["result"] = thunk()
                entry["status"] = status_of(entry["result"])
            except OverBudget:
                entry["status"] = "stopped: budget ran out during the stage"
            except Exception as exc:  # a failing stage is recorded, the plan goes on
                entry["status"] = f"FAILED: {type(exc).__name__}: {exc}"
                entry["traceback"] = traceback.format_exc(limit=8)
            entry["seconds"] = round(time.perf_counter() - t0, 2)
        print(f"[{time.perf_counter() - start:6.1f} s] {name}: {entry['status']}", flush=True)
        stages.append(entry)
    total = time.perf_counter() - start
    return {"seconds": round(total, 2), "cpu_seconds": round(time.process_time() - cpu, 2), "budget_s": budget,
            "within_budget": total <= budget, "stages": stages}


def status_of(result: Any) -> str:
    texts = list(result.values()) if isinstance(result, dict) else [result]
    flat = [t for t in texts if isinstance(t, str)]
    if any(t.startswith("FAILED") for t in flat):
        return "FAILED"
    if isinstance(result, str) and result.startswith("skipped"):
        return result
    return "ok"


def environment(device: str) -> dict[str, Any]:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    import transformers
    return {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "commit": commit or None,
            "device": torch.cuda.get_device_name(0) if device == "cuda" else f"CPU ({os.cpu_count()} cores)",
            "torch": torch.__version__, "transformers": transformers.__version__, "mode": device}


def markdown(report: dict[str, Any]) -> str:
    env, run = report["environment"], report["run"]
    lines = [f"GPU check on {env['device']}, {env['date']}, commit {env['commit']}, torch {env['torch']}, "
             f"transformers {env['transformers']}: {run['seconds']:.0f} s of a {run['budget_s']:.0f} s budget "
             f"({'within' if run['within_budget'] else 'OVER'}; {run['cpu_seconds']:.0f} s of process CPU time)", "",
             "| stage | status | seconds | details |", "|---|---|---|---|"]
    for s in run["stages"]:
        result = s.get("result")
        detail = "; ".join(f"{k}: {v}" for k, v in result.items()) if isinstance(result, dict) and \
            not s["stage"].startswith("bench-real") else (result if isinstance(result, str) else "")
        lines.append(f"| {s['stage']} | {s['status']} | {s['seconds']:.1f} | {detail} |")
    for s in run["stages"]:
        if s["stage"].startswith("bench-real") and isinstance(s.get("result"), dict):
            lines += ["", f"### {s['stage']}", "", bench_real.markdown(s["result"])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = "cuda" if torch.cuda.is_available() and not args.dry else "cpu"
    if device == "cuda":
        torch.use_deterministic_algorithms(True, warn_only=True)
    else:
        torch.set_num_threads(min(2, os.cpu_count() or 1))
    args.out.mkdir(parents=True, exist_ok=True)
    report = {"environment": environment(device), "run": run_plan(device, args.budget or BUDGET_S[device], args.out)}
    (args.out / "gpu_report.json").write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    (args.out / "gpu_report.md").write_text(markdown(report), encoding="utf-8")
    print(markdown(report))
    failed = [s["stage"] for s in report["run"]["stages"]
              if not s["status"].startswith(("ok", "skipped: deepspeed", "skipped: DeepSpeed"))]
    return 1 if failed or not report["run"]["within_budget"] else 0


if __name__ == "__main__":
    sys.exit(main())
