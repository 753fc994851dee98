"""The price of `demo robustness --zoo`'s corruption suite: CPU seconds to write a corrupted
picture, per ImageNet-C type, and to score one question, per model; extrapolated to a zoo.

On `--per-class` clean scans per class of the `fashion-test` suite (seed DATA_SEED, as the demo
draws them), it writes every type of `data.corruptions.COMMON` at severity 3
(`data.corrupted_suite`, timed per type: process CPU seconds / pictures), builds the demo's
10-way questions on one domain, and scores them with each model named (`mc eval`'s machinery, one
thread, timed from load to the last row: CPU seconds / questions). It prints both, then the
extrapolation to `--zoo` (dual encoders, VLMs, embedding models; the full zoo by default: 10, 15
and 3) at the demo's settings (`experiments.robustness.zoo.FULL`): every clean scan
corrupted at all five severities, and each member scoring CORRUPT_PER_CLASS questions per class
on each type at severity 3 and CORRUPT_OTHER_PER_CLASS at the other four.

    python benchmarks/zoo_corruption_price.py --dual zoo:quick-clip,zoo:quick-siglip \
        --vlm zoo:quick-llava,zoo:quick-idefics3 --per-class 10 --out price
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from robustvlm.data.corrupted_suite import write_corrupted_suite
from robustvlm.data.corruptions import COMMON, SEVERITIES
from robustvlm.data.loaders import load_examples
from robustvlm.data.synth.held_out import DATA_SEED, synthesize_suite
from robustvlm.experiments.robustness.zoo import FULL, QUESTION
from robustvlm.model_ref import ModelRef
from robustvlm.models.zoo_recipes import resolve_model_ref
from robustvlm.multiple_choice.build import build_questions, write_questions
from robustvlm.workflows.mc_eval import evaluate_models, model_slug
from robustvlm.workflows.zoo.data import FASHION_CLASSES


def corruption_seconds(clean: Path, out: Path, per_class: int) -> dict[str, float]:
    """{type: CPU seconds per picture} of writing every COMMON type at severity 3."""
    seconds = {}
    for corruption in COMMON:
        start = time.process_time()
        write_corrupted_suite(clean, out, corruptions=[corruption], severities=[3])
        seconds[corruption] = (time.process_time() - start) / (per_class * len(FASHION_CLASSES))
    return seconds


def scoring_seconds(models: list[str], questions: Path, out: Path, n: int) -> dict[str, float]:
    """{model: CPU seconds per question} of scoring `questions` (n of them), load included."""
    seconds = {}
    for name in models:
        start = time.process_time()
        evaluate_models([resolve_model_ref(ModelRef.parse(name))], [questions], out / "scores" / model_slug(name), method="loglik",
                        allow_outside_root=True)
        seconds[name] = (time.process_time() - start) / n
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dual", default="", help="dual encoders to time (comma-separated model names)")
    parser.add_argument("--vlm", default="", help="VLMs to time")
    parser.add_argument("--embedding", default="", help="embedding models to time (folders)")
    parser.add_argument("--per-class", type=int, default=10, help="clean scans per class (10 classes)")
    parser.add_argument("--zoo", default="10,15,3", help="dual encoders, VLMs, embedding models to extrapolate to")
    parser.add_argument("--out", default=None, help="work folder (default: a temporary one)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    out = Path(args.out or tempfile.mkdtemp(prefix="zoo_price_"))
    if (out / "scores").exists():
        raise SystemExit(f"error: {out} holds an earlier price run's scores: choose another --out")
    clean = synthesize_suite(out / "fashion-test", "fashion-test", args.per_class) / "clean"
    per_picture = corruption_seconds(clean, out / "corrupted", args.per_class)
    examples = load_examples(out / "corrupted", fmt="folder", instruction_template=QUESTION, verbose=False)
    questions = build_questions([e for e in examples if e.env == "gaussian_noise-3"], k=len(FASHION_CLASSES),
                                distractors="random", seed=DATA_SEED, prompt=QUESTION)
    write_questions(questions, out / "questions.jsonl")
    groups = {g: [m for m in getattr(args, g).split(",") if m] for g in ("dual", "vlm", "embedding")}
    per_question = {g: scoring_seconds(ms, out / "questions.jsonl", out, len(questions)) for g, ms in groups.items()}
    print("corruption, CPU ms per picture (severity 3):")
    for name, s in per_picture.items():
        print(f"  {name:20s} {1000 * s:8.2f}")
    print("scoring, CPU ms per question:")
    for g, timed in per_question.items():
        for name, s in timed.items():
            print(f"  {g:9s} {name:40s} {1000 * s:8.2f}")
    mean = {g: sum(t.values()) / len(t) for g, t in per_question.items() if t}
    counts = dict(zip(("dual", "vlm", "embedding"), (int(c) for c in args.zoo.split(","))))
    per_domain = {3: FULL.corrupt_per_class * len(FASHION_CLASSES),
                  **{s: FULL.corrupt_other_per_class * len(FASHION_CLASSES) for s in SEVERITIES if s != 3}}
    n_questions = len(COMMON) * sum(per_domain.values())
    scoring = n_questions * sum(counts[g] * mean.get(g, mean["vlm"]) for g in counts)
    writing = sum(per_picture.values()) * len(SEVERITIES) * FULL.per_class * len(FASHION_CLASSES)
    print(f"extrapolated to {counts}: {n_questions} questions per member ({per_domain} per type and severity), "
          f"scoring {scoring:.0f} CPU s, corrupting {FULL.per_class * len(FASHION_CLASSES)} scans x "
          f"{len(COMMON)} types x {len(SEVERITIES)} severities {writing:.0f} CPU s, total {(scoring + writing) / 60:.1f} "
          "CPU min (embedding models priced as the VLMs when none was timed)")


if __name__ == "__main__":
    main()
