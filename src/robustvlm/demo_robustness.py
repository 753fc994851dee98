"""`robustvlm demo robustness`: accuracy on the line for a family of tiny fine-tuned VLMs.

Built-in `domains` digits suite -> a seeded per-class split of image indices (train / held out)
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
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from robustvlm.analysis.robustness import ModelRobustness
from robustvlm.config import RunConfig, validate_config
from robustvlm.data.loaders import load_examples
from robustvlm.data.records import Example
from robustvlm.data.synth import synthesize
from robustvlm.multiple_choice.build import MCQuestion, build_questions, write_questions
from robustvlm.multiple_choice.evaluate import evaluate_models
from robustvlm.multiple_choice.score import continuation, vlm_prompt_text
from robustvlm.report.tables import fmt, markdown_table
from robustvlm.workflows.robustness import fit_from_results
from robustvlm.workflows.train import train

SUITE = "digits"
INSTRUCTION = "What digit is shown?"
REFERENCE = "clean"
SHIFTS = ("rotated", "coloured", "noisy")
K_OPTIONS = 5
DATA_SEED = 0
R2_POOR = 0.5  # below this the report calls the line fit poor
NEAR_CHANCE = 0.1  # accuracy within this of chance counts as near chance


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


def synthesize_suite(out: Path, per_class: int) -> Path:
    """The `domains` benchmark in `out` (reused when already there with these settings); returns
    the root ROOT/DOMAIN/CLASS/NNNN.png of SUITE."""
    manifest = out / "manifest.json"
    if manifest.is_file():
        info = json.loads(manifest.read_text(encoding="utf-8"))
        counts = info.get("suites", {}).get(SUITE, {}).get("counts", {}).get(REFERENCE, {})
        if info.get("seed") == DATA_SEED and set(counts.values()) == {per_class}:
            return out / SUITE
    synthesize("domains", out, seed=DATA_SEED, n_per_env=per_class)
    return out / SUITE


def held_out_indices(per_class: int, test_fraction: float, classes: list[str]) -> dict[str, set[int]]:
    """Per class, the image indices held out of training (seeded; the same in every domain,
    so shifted questions show images never trained on in any style)."""
    n_test = max(1, round(per_class * test_fraction))
    return {
        cls: set(np.random.default_rng([DATA_SEED, i]).permutation(per_class)[:n_test].tolist())
        for i, cls in enumerate(sorted(classes))
    }


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
    root = synthesize_suite(out / "data", plan.per_class)
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


def run_robustness_demo(out_dir: str | Path, *, quick: bool = False) -> dict:
    """Train the family, score it on every domain, fit the lines; write report.md, results.json,
    fits/<shift>/{fit.json, scatter.png}. Returns the results.json content."""
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
        [{"name": p, "family": "vlm"} for p in paths.values()], data.benches, out / "scores",
        method="loglik", resume=True,
    )
    name_of = {p: name for name, p in paths.items()}
    fits = {
        shift: fit_from_results(
            results_csv, ref=REFERENCE, shift=shift, baseline=None, transform="probit",
            out_dir=out / "fits" / shift,
        )
        for shift in SHIFTS
    }
    seconds = time.perf_counter() - t0

    summary = {
        "quick": quick,
        "seconds": round(seconds, 1),
        "reference": REFERENCE,
        "shifts": list(SHIFTS),
        "k_options": K_OPTIONS,
        "chance": 1 / K_OPTIONS,
        "n_train_images": len(data.train_questions),
        "n_questions_per_bench": data.n_test,
        "members": [asdict(m) for m in plan.members],
        "results_csv": str(results_csv),
        "fits": {
            shift: {"fit": f.fit.to_dict(), "models": [_model_row(m, name_of) for m in f.models]}
            for shift, f in fits.items()
        },
    }
    (out / "results.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    (out / "report.md").write_text(render_report(summary, plan), encoding="utf-8")
    print(f"\nreport: {out / 'report.md'}")
    return summary


def _model_row(m: ModelRobustness, name_of: dict[str, str]) -> dict:
    """A model's row in results.json, named by its family-member name."""
    p = m.point
    return {"model": name_of[p.model], "acc_ref": p.acc_ref, "acc_shift": p.acc_shift, "n_ref": p.n_ref,
            "n_shift": p.n_shift, "effective_robustness": m.effective_robustness}


def fit_verdict(fit: dict, models: list[dict], chance: float) -> str:
    """A plain-words reading of one line fit: near-chance models first, then r^2."""
    if max(m["acc_ref"] for m in models) < chance + NEAR_CHANCE:
        return (f"every model is within {100 * NEAR_CHANCE:.0f} points of chance on the reference: the line "
                f"fits noise whatever its r^2 ({fit['r2']:.2f}); do not read slope or ER")
    if fit["r2"] < R2_POOR:
        return f"poor fit (r^2 {fit['r2']:.2f} < {R2_POOR}): the line explains little; read ER with caution"
    return f"r^2 {fit['r2']:.2f}; slope {fit['slope']:.2f} {'<' if fit['slope'] < 1 else '>='} 1"


def render_report(summary: dict, plan: Plan) -> str:
    """The Markdown report: setup, per-shift fits, effective-robustness tables, scatter plots."""
    chance = summary["chance"]
    fit_rows = [
        [shift, fmt(f["fit"]["slope"]), fmt(f["fit"]["intercept"]), fmt(f["fit"]["r2"]),
         str(f["fit"]["n"]), fit_verdict(f["fit"], f["models"], chance)]
        for shift, f in summary["fits"].items()
    ]
    parts = [
        "# robustvlm demo: effective robustness" + (" (quick)" if summary["quick"] else ""),
        "",
        f"{len(plan.members)} tiny Idefics3 models (randomly initialised, about 0.6M parameters) "
        f"fine-tuned with ERM on {summary['n_train_images']} `{REFERENCE}` images of the built-in "
        f"`domains` {SUITE} suite (10 classes; sklearn's handwritten digit scans), varying training steps, seed and training-set size. "
        f"Each is scored by option log-likelihood on {K_OPTIONS}-way multiple-choice questions "
        f"(random distractors; chance = {chance:.0%}) about held-out images: `{REFERENCE}` "
        f"(reference) and the same scans drawn as {', '.join(f'`{s}`' for s in SHIFTS)} "
        "(shifts). Training questions list their own random options, as the test questions do, "
        "and the training answer is the scored continuation itself (e.g. \"C. seven\"). "
        "For each shift a line is fitted to probit(shifted accuracy) vs "
        "probit(reference accuracy) over all models; a model's effective robustness (ER) is its "
        "shifted accuracy minus the line's prediction, in percentage points.",
        "",
        "What these numbers are: a handful of tiny models trained for a minute or less, each accuracy "
        f"measured on {summary['n_questions_per_bench']} questions per domain, with wide confidence intervals (the error bars). Accuracies "
        "near chance carry little signal, and so does a line fitted through them. Because every "
        "model is in the fit, ER averages about zero by construction; it measures scatter "
        "around the family's own line, not robustness gained by a method.",
        "",
        "## Line fits (probit axes)",
        "",
        markdown_table(["shift", "slope", "intercept", "r^2", "models", "reading"], fit_rows),
        "",
    ]
    for shift, f in summary["fits"].items():
        rows = [
            [m["model"], fmt(100 * m["acc_ref"], 1), fmt(100 * m["acc_shift"], 1),
             f"{100 * m['effective_robustness']:+.1f}"]
            for m in f["models"]
        ]
        near_chance = sum(m["acc_shift"] < chance + NEAR_CHANCE for m in f["models"])
        parts += [
            f"## {REFERENCE} -> {shift}",
            "",
            markdown_table(["model", f"{REFERENCE} acc %", f"{shift} acc %", "ER (points)"], rows),
            "",
            f"{near_chance} of {len(f['models'])} models are within {100 * NEAR_CHANCE:.0f} points of chance on "
            f"`{shift}`." if near_chance else "No model is near chance here.",
            "",
            f"![{shift} vs {REFERENCE}](fits/{shift}/scatter.png)",
            "",
        ]
    parts.append(f"Wall time of this invocation: {summary['seconds']:.0f} s (work reused from an earlier run not counted).")
    return "\n".join(parts) + "\n"
