"""`robustvlm demo robustness --zoo`: accuracy on the line over the pretrained model zoo.

Built-in `fashion-test` suite (Fashion-MNIST's 10,000 test-split scans only, none of which any
zoo member saw, drawn clean / rotated / inverted / coloured / noisy) and `fashion-test-graded`
(the same scans under graded-severity shifts: small rotation, tint, low contrast, blur,
translation, stronger noise; `data.synth.graded`) -> 10-way questions "What
type of object is in this photo?" (every class an option, in a seeded random order, the same
for a scan in every style), and the ImageNet-C corruption suite of the clean scans
(`experiments.robustness.zoo_corruptions`: 15 types x 5 severities, domains
`<corruption>-<severity>`) -> the members (`Plan`; FULL: every full member, the first zoo's and
Zoo II's): the zoo's dual encoders zero-shot (similarity with a template ensemble), its VLMs by
option log-likelihood, and embedding models trained from a zoo VLM with `embed train` on
training-split pictures (VQA pairs: question -> class name) ->
per shift: the probit line over every member (r^2) and over the members above chance, the dual encoders' line and every model's
effective robustness (ER) against it, the VLMs' mean ER and each tower-sharing VLM's ER over its
own tower with bootstrap intervals (models and questions resampled; `analysis.effective_robustness`)
-> the task-signal experiment (`robustness task-signal`) with a zoo VLM as the frozen base. The
same per corruption type at severity 3 and per severity pooled over types.

The corruption suite's question counts (CORRUPT_PER_CLASS at severity 3, CORRUPT_OTHER_PER_CLASS
at the others: 2,700 questions per member) were set from its price, measured with
benchmarks/zoo_corruption_price.py (one thread, CPU time, full members): 2.4-3.5 ms per question
for a dual encoder, 15-16.5 ms for a VLM, 3 ms for a (quick) embedding model, 1-11 ms to write a
corrupted picture (glass_blur 116-127 ms). Over the full zoo (10 dual encoders, 15 VLMs, 3
embedding models) scoring costs about four times what corrupting does, and every type at every
severity on all 200 scans would cost about 4.6 times the suite.

Outputs: results.csv (member, group, method, bench, accuracy, n, CIs), results.json
(`ZooRobustnessResults`), report.md / report.html, fits/<shift>/{fit.json, scatter.png} (the
dual-encoder line), scores/, embed/<member>/ (embed-train runs), task_signal/ (its own report),
data/, questions/. Every step resumes: re-running reuses what is finished, and a rerun may measure
more (or other) members with the same settings: scores are kept per member folder, whose name holds
the recipe key, so a rebuilt member is scored afresh.
"""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Sequence
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
from scipy.stats import binomtest

from robustvlm.analysis.accuracy_on_the_line import LineFit, ModelPoint, fit_line, fit_robustness
from robustvlm.analysis.effective_robustness import ErEstimate, er_estimate
from robustvlm.analysis.task_signal import Lift
from robustvlm.config import EmbedRunConfig, validate_config
from robustvlm.data.corruptions import COMMON
from robustvlm.data.loaders import load_examples
from robustvlm.data.synth.graded import GRADED_STYLES
from robustvlm.data.synth.held_out import DATA_SEED, synthesize_suite
from robustvlm.data.synth.writer import save_png
from robustvlm.errors import ConfigError
from robustvlm.experiments.robustness.zoo_corruptions import (
    fitted_domains,
    pooled_outcomes,
    pooled_results,
    pooled_rows,
    prepare_corrupted_questions,
)
from robustvlm.experiments.robustness.zoo_report import (
    ABOVE_CHANCE_P,
    TITLE,
    ZooMember,
    ZooRobustnessResults,
    ZooShift,
    report_blocks,
)
from robustvlm.machine import write_results_json
from robustvlm.model_ref import ZOO, ModelRef
from robustvlm.models.zoo_recipes import FULL as ZOO_FULL
from robustvlm.models.zoo_recipes import ZOO2, recipe, resolve_model_ref
from robustvlm.multiple_choice.build import build_questions, write_questions
from robustvlm.multiple_choice.prompts import GENERATIVE_PROMPTS
from robustvlm.report.page import write_page
from robustvlm.report.smoke import page_title
from robustvlm.runs import claim_run_folder, read_jsonl, write_jsonl
from robustvlm.workflows.embed.train import embed_train
from robustvlm.workflows.mc_eval import evaluate_models, model_slug, write_results
from robustvlm.workflows.measure.robustness_fit import fit_from_results, pair_benches, read_results
from robustvlm.workflows.measure.task_signal import load_task_signal_config, run_task_signal
from robustvlm.workflows.zoo.data import FASHION_CLASSES, training_pool

SUITE, GRADED_SUITE = "fashion-test", "fashion-test-graded"
REFERENCE = "clean"
SHIFTS = ("rotated", "inverted", "coloured", "noisy")
#: The graded-severity shifts of the same scans (`data.synth.graded`; severities fixed a priori).
GRADED_SHIFTS = tuple(style for style in GRADED_STYLES if style != REFERENCE)
ALL_SHIFTS = (*SHIFTS, *GRADED_SHIFTS)
QUESTION = GENERATIVE_PROMPTS[0]  # the question the zoo's VLMs answer on their held-out split
DUAL, VLM, EMBED = "dual-encoder", "vlm", "embedding"
#: Questions per class on each corruption type at the headline severity (3) and at the others
#: (module doc: the price that set them).
CORRUPT_PER_CLASS, CORRUPT_OTHER_PER_CLASS = 10, 2


@dataclass(frozen=True)
class EmbedMember:
    """An embedding model trained by `embed train` from zoo VLM `base` for `steps` steps."""

    base: str
    steps: int
    seed: int = 0

    @property
    def name(self) -> str:
        return f"embed-{self.base}-s{self.steps}" + (f"-seed{self.seed}" if self.seed else "")


@dataclass(frozen=True)
class Plan:
    """One run: zoo members by name, embedding members, scans per class and style, the
    embedding models' training images, the task-signal base and its config overrides; the
    ImageNet-C corruptions of the clean scans and their questions per class at the headline
    severity and at the others (`experiments.robustness.zoo_corruptions`; none: no suite)."""

    dual_encoders: tuple[str, ...]
    vlms: tuple[str, ...]
    embeddings: tuple[EmbedMember, ...]
    per_class: int
    embed_images: int
    task_signal_base: str
    task_signal: tuple[str, ...] = ()
    n_boot: int = 2000
    corruptions: tuple[str, ...] = ()
    corrupt_per_class: int = 0
    corrupt_other_per_class: int = 0


FULL = Plan(
    dual_encoders=tuple(r.name for r in (*ZOO_FULL, *ZOO2) if not r.is_vlm),
    vlms=tuple(r.name for r in (*ZOO_FULL, *ZOO2) if r.is_vlm),
    embeddings=tuple(EmbedMember("idefics3-siglip-m", s) for s in (25, 75, 200)),
    per_class=20,
    embed_images=2000,
    task_signal_base="idefics3-siglip-m",
    task_signal=("n_boot=1000",),  # the built-in seeds (0, 1) and budgets (100, 200, 400 steps)
    n_boot=1000,
    corruptions=COMMON,
    corrupt_per_class=CORRUPT_PER_CLASS,
    corrupt_other_per_class=CORRUPT_OTHER_PER_CLASS,
)
QUICK = Plan(
    dual_encoders=("quick-clip", "quick-siglip", "quick-clip-aug"),
    vlms=("quick-llava", "quick-idefics3", "quick-llava-curriculum"),
    embeddings=(EmbedMember("quick-idefics3", 2), EmbedMember("quick-idefics3", 4)),
    per_class=2,
    embed_images=40,
    task_signal_base="quick-idefics3",
    task_signal=("per_class=4", "budgets=[2,4]", "seeds=[0]", "probe.n_train=[10,20]", "probe.seeds=[0]",
                 "n_boot=100", "workers=1", "train.batch_size=4"),
    n_boot=200,
    corruptions=("gaussian_noise", "defocus_blur", "contrast"),
    corrupt_per_class=2,
    corrupt_other_per_class=1,
)


def plan_of(names: Sequence[str], base: Plan = FULL) -> Plan:
    """`base` measured on the zoo members `names` only (a reduced zoo): grouped by architecture;
    the embedding models and the task signal built on `base`'s VLM when it is named, else on the
    first VLM named."""
    recipes = [recipe(n) for n in names]
    vlms = tuple(r.name for r in recipes if r.is_vlm)
    duals = tuple(r.name for r in recipes if not r.is_vlm)
    if len(duals) < 2 or not vlms:
        raise ConfigError(f"a reduced zoo needs at least two dual encoders and one VLM, got {list(names)}")
    vlm = base.task_signal_base if base.task_signal_base in vlms else vlms[0]
    embeddings = tuple(EmbedMember(vlm, m.steps, m.seed) for m in base.embeddings)
    return replace(base, dual_encoders=duals, vlms=vlms, embeddings=embeddings, task_signal_base=vlm)


def zoo_members(plan: Plan) -> list[ZooMember]:
    """The zoo members of the plan (dual encoders, then VLMs), each with the tower it copies and
    loaded from its folder (`resolve_model_ref`: a clear error when it is not built; the
    folder's recipe key keeps the scores of a rebuilt member apart)."""
    def tower(name: str) -> str:
        tower = recipe(name).tower_ref
        return tower.location if tower is not None and tower.kind == ZOO else ""
    return ([ZooMember(n, DUAL, resolve_model_ref(ModelRef.zoo(n)).name, "") for n in plan.dual_encoders]
            + [ZooMember(n, VLM, resolve_model_ref(ModelRef.zoo(n)).name, tower(n)) for n in plan.vlms])


def prepare_questions(out: Path, plan: Plan) -> dict[str, Path]:
    """The two suites (reused when present) and one 10-way question file per style, reference
    first: `fashion-test`'s styles, then `fashion-test-graded`'s shifts (the same scans), then
    the corruption suite's domains (of `fashion-test`'s clean scans)."""
    benches, per_class = {}, plan.per_class
    for suite, styles in ((SUITE, (REFERENCE, *SHIFTS)), (GRADED_SUITE, GRADED_SHIFTS)):
        root = synthesize_suite(out / "data" / suite, suite, per_class)
        examples = load_examples(root, fmt="folder", instruction_template=QUESTION, verbose=False)
        for style in styles:
            questions = build_questions([ex for ex in examples if ex.env == style], k=len(FASHION_CLASSES),
                                        distractors="random", seed=DATA_SEED, prompt=QUESTION)
            benches[style] = out / "questions" / f"{style}.jsonl"
            write_questions(questions, benches[style])
    if plan.corruptions:
        benches |= prepare_corrupted_questions(
            out, out / "data" / SUITE / REFERENCE, plan.corruptions, plan.corrupt_per_class,
            plan.corrupt_other_per_class, prompt=QUESTION, k=len(FASHION_CLASSES), seed=DATA_SEED)
    return benches


def embed_pairs(out: Path, n_images: int) -> Path:
    """data/embed.jsonl: `n_images` training-split pictures (drawn as the suite's clean style) as
    VQA pairs, a question from the zoo's set -> the class name."""
    path = out / "data" / "embed.jsonl"
    if path.is_file():
        return path
    pool, rng = training_pool(n_images, seed=DATA_SEED), np.random.default_rng([DATA_SEED, 7])
    rows = []
    for i in range(len(pool)):
        image = out / "data" / "embed_images" / f"{i:05d}.png"
        image.parent.mkdir(parents=True, exist_ok=True)
        save_png(pool.picture(i), image)
        rows.append({"id": f"train-{i}", "image": str(image), "instruction": str(rng.choice(GENERATIVE_PROMPTS)),
                     "target": FASHION_CLASSES[int(pool.labels[i])], "env": "vqa", "split": "train"})
    write_jsonl(path, rows)
    return path


def embed_config(member: EmbedMember, pairs: Path) -> EmbedRunConfig:
    """The `embed train` config of an embedding member: the zoo VLM's tower frozen, connector and
    decoder trained on the VQA pairs (the task-signal experiment's settings)."""
    raw = {
        "model": {"name": ModelRef.zoo(member.base).name, "trainable": "paper"},
        "data": {"path": str(pairs)},
        "embed": {"temperature": 0.02, "distinct_negatives": True, "class_templates": ["{class}"]},
        "train": {"steps": member.steps, "lr": 1e-3, "weight_decay": 0.01, "batch_size": 16, "warmup_ratio": 0.1,
                  "seed": member.seed, "save_every": member.steps, "keep_checkpoints": 1, "cpu_threads": 1},
    }
    return validate_config(raw, f"zoo robustness ({member.name})", EmbedRunConfig)


def train_embeddings(out: Path, plan: Plan) -> list[ZooMember]:
    """Train (or reuse) every embedding member; their logs go to logs/<name>.log."""
    pairs = embed_pairs(out, plan.embed_images)
    members = []
    for m in plan.embeddings:
        run = out / "embed" / m.name
        if not (run / "final" / "embedding.json").is_file():
            print(f"embed train {m.name}", flush=True)
            (out / "logs").mkdir(parents=True, exist_ok=True)
            with (out / "logs" / f"{m.name}.log").open("a", encoding="utf-8") as log, redirect_stdout(log), \
                    redirect_stderr(log):
                embed_train(embed_config(m, pairs), run, resume=True, progress=False)
        members.append(ZooMember(m.name, EMBED, str(run / "final"), m.base))
    return members


def score_members(out: Path, members: Sequence[ZooMember], benches: dict[str, Path],
                  corruptions: Sequence[str] = ()) -> Path:
    """Score every member on every style (`mc eval`'s machinery, resumed); results.csv with the
    member names and groups, and each member's rows on the pooled corruption domains."""
    scored = evaluate_models([ModelRef.folder(m.model) for m in members], list(benches.values()), out / "scores", method="loglik",
                             resume=True, allow_outside_root=True)  # benchmarks this run built
    by_model = {m.model: m for m in members}
    rows = [{**row, "model": by_model[row["model"]].name, "family": by_model[row["model"]].group}
            for row in _csv_rows(scored) if row["model"] in by_model]
    method = {row["model"]: row["method"] for row in rows}  # similarity for the dual encoders
    for m in members if corruptions else ():
        folder = out / "scores" / model_slug(m.model)
        scores = {style: folder / f"{style}.jsonl" for style in benches}
        rows += pooled_results(m.name, m.group, method[m.name], pooled_rows(scores, corruptions))
    write_results(out / "results.csv", rows)
    return out / "results.csv"


def _csv_rows(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def question_outcomes(out: Path, members: Sequence[ZooMember], styles: Sequence[str],
                      corruptions: Sequence[str] = ()) -> dict[str, dict[str, np.ndarray]]:
    """{member: {style: its 0/1 outcomes, ordered by question id}} from scores/<model>/<style>.jsonl,
    with the pooled corruption domains of `corruptions` (their types' outcomes, concatenated)."""
    outcomes = {}
    for m in members:
        folder = out / "scores" / model_slug(m.model)
        rows = {style: sorted(read_jsonl(folder / f"{style}.jsonl"), key=lambda r: (str(r["id"]), r["rotation"]))
                for style in styles}
        outcomes[m.name] = {style: np.array([bool(r["correct"]) for r in rs]) for style, rs in rows.items()}
        if corruptions:
            outcomes[m.name] |= pooled_outcomes(outcomes[m.name], corruptions)
    return outcomes


def above_chance_line(points: Sequence[ModelPoint], k: int = len(FASHION_CLASSES)) -> LineFit | None:
    """The probit line over the members whose reference accuracy is above chance 1/`k` (one-sided
    binomial test, p < ABOVE_CHANCE_P; scipy's `binomtest`); None when fewer than two are."""
    above = [p for p in points
             if binomtest(round(p.acc_ref * p.n_ref), p.n_ref, 1 / k, alternative="greater").pvalue < ABOVE_CHANCE_P]
    if len(above) < 2:
        return None
    return fit_line([p.acc_ref for p in above], [p.acc_shift for p in above])


def analyse_shift(out: Path, results_csv: Path, shift: str, members: Sequence[ZooMember], n_boot: int,
                  by_style: dict[str, dict[str, np.ndarray]]) -> ZooShift:
    """One shift: the line over every member, the dual encoders' line (fits/<shift>/), the VLMs'
    and the embedding models' mean ER against it, and each VLM's ER over its own zoo tower."""
    points = pair_benches(read_results(results_csv), REFERENCE, shift, str(results_csv))
    outcomes = {name: (o[REFERENCE], o[shift]) for name, o in by_style.items()}
    dual_line = fit_from_results(results_csv, ref=REFERENCE, shift=shift, baseline=DUAL, out_dir=out / "fits" / shift,
                                 n_boot=n_boot, resume=True)
    duals = {m.name for m in members if m.group == DUAL}

    def against_duals(names: list[str], against: Sequence[str] = ()) -> ErEstimate | None:
        if not names:
            return None
        return er_estimate(points, names, DUAL, against=against, n_boot=n_boot, outcomes=outcomes)

    return ZooShift(
        shift=shift,
        all_members=fit_robustness(points, ref=REFERENCE, shift=shift, n_boot=n_boot),
        above_chance=above_chance_line(points),
        dual_line=dual_line,
        vlm_er=against_duals([m.name for m in members if m.group == VLM]),
        embed_er=against_duals([m.name for m in members if m.group == EMBED]),
        same_tower=[e for m in members if m.group == VLM and m.tower in duals
                    for e in [against_duals([m.name], [m.tower])] if e is not None],
    )


def task_signal_lifts(out: Path, plan: Plan) -> tuple[str, dict[str, list[Lift]]]:
    """Run the task-signal experiment with zoo VLM `plan.task_signal_base` as the frozen base
    (task_signal/, resumed); returns its config's model name and its lifts per shift."""
    ref = ModelRef.zoo(plan.task_signal_base)
    resolve_model_ref(ref)  # a clear error when the member is not built
    model = ref.name
    cfg = load_task_signal_config(overrides=[f"model.name={model}", "base_steps=0", *plan.task_signal])
    print(f"task-signal experiment on {model} (frozen tower)", flush=True)
    summary = run_task_signal(cfg, out / "task_signal", resume=True, label=f"zoo tower {model}")
    return model, {shift: list(r.lifts) for shift, r in summary.shifts.items()}


def run_zoo_robustness(out_dir: str | Path, *, quick: bool = False, members: Sequence[str] | None = None
                       ) -> ZooRobustnessResults:
    """The whole variant (module doc) into `out_dir`, on the full zoo (the quick members with
    `quick`), or on zoo members `members` only; returns what results.json holds."""
    torch.set_num_threads(1)
    plan = QUICK if quick else FULL
    if members:
        plan = plan_of(members, plan)
    t0 = time.perf_counter()
    measured = zoo_members(plan)  # every member built, before any work
    resolve_model_ref(ModelRef.zoo(plan.task_signal_base))
    settings = {"per_class": plan.per_class, "embed_images": plan.embed_images, "n_boot": plan.n_boot,
                "embed_steps": [m.steps for m in plan.embeddings], "task_signal": list(plan.task_signal),
                "corruptions": list(plan.corruptions), "corrupt_per_class": plan.corrupt_per_class,
                "corrupt_other_per_class": plan.corrupt_other_per_class}
    out = claim_run_folder(Path(out_dir).absolute(), settings, command="demo robustness --zoo", resume=True)
    benches = prepare_questions(out, plan)
    measured += train_embeddings(out, plan)
    print(f"scoring {len(measured)} members on {len(benches)} styles", flush=True)
    results_csv = score_members(out, measured, benches, plan.corruptions)
    by_style = question_outcomes(out, measured, list(benches), plan.corruptions)
    shifts = {shift: analyse_shift(out, results_csv, shift, measured, plan.n_boot, by_style) for shift in ALL_SHIFTS}
    corrupted = {d: analyse_shift(out, results_csv, d, measured, plan.n_boot, by_style)
                 for d in fitted_domains(plan.corruptions)}
    model, lifts = task_signal_lifts(out, plan)
    results = ZooRobustnessResults(
        quick=quick, seconds=round(time.perf_counter() - t0, 1), suite=SUITE, reference=REFERENCE,
        k_options=len(FASHION_CLASSES), n_questions=len(read_jsonl(benches[REFERENCE])), members=measured,
        results_csv=str(results_csv), shifts=shifts, task_signal_model=model, task_signal=lifts,
        corruptions=corrupted,
    )
    write_results_json(out, results.to_dict())
    results = ZooRobustnessResults.from_dict(json.loads((out / "results.json").read_text(encoding="utf-8")))
    blocks = report_blocks(results)
    md, html = write_page(blocks, out, title=f"robustvlm: {page_title(TITLE, results.quick)}")
    print(f"\nreport: {md.absolute()} and {html.absolute()} ({results.seconds:.0f} s)")
    return results
