"""`robustvlm robustness task-signal`: does question-guided (VQA-style) training put models on
a higher accuracy-on-the-line than caption-style training over one frozen vision tower?

1. Data (`task_signal_data`): the built-in `domains` digits, captions and question-answer pairs
   from the generator's attributes, K-way "What digit is shown?" questions about held-out scans
   in the reference style and in each shifted style.
2. One base VLM (tiny Idefics3 by default): built once, pretrained generatively for
   `base_steps` on every training image's caption and questions alike (neutral to the
   families), saved (`base_steps: 0`: a hub model as it is); its vision tower is then frozen in
   every model below.
3. Families: for each family (VQA share s), seed and budget (optimizer steps), an embedding
   model trained from the base (`embed train`), then scored by similarity on every question
   file (`mc eval`'s machinery). Runs go through `workers` processes, one torch thread each.
4. The baseline family: linear probes (logistic regression) on the base's frozen image features
   (its image tokens as the language model receives them, laid end to end) of n training
   images, for each n and seed; an option's score is the probe's logit for its class.
5. One probit line per family and shift; the lift of each family over the caption family and
   over the probe line at matched reference accuracy, with bootstrap CIs over models
   (`analysis.task_signal`); report.md / report.html with the probit plots.

Outputs: `results.csv` (model, family = task signal, method, bench, accuracy, n, CIs: readable
by `robustness fit`), `results.json`, `report.md`, `report.html`, `plots/<shift>.png`,
`models/<member>/` (embed-train run folders, with `scores/`), `probes/`, `base/`, `data/`,
`questions/`. Every step resumes: re-running with `--resume` reuses finished work.
"""

from __future__ import annotations

import csv
import time
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import torch
import yaml

from robustvlm.analysis.accuracy import accuracy_summary
from robustvlm.analysis.accuracy_on_the_line import fit_robustness
from robustvlm.analysis.linear_probe import fit_probe
from robustvlm.analysis.task_signal import family_lines, lift_between
from robustvlm.config import (
    EmbedRunConfig,
    RunConfig,
    TaskSignalConfig,
    apply_overrides,
    deep_merge,
    read_yaml_mapping,
    validate_config,
)
from robustvlm.data.images import load_image
from robustvlm.data.synth.digit_attributes import CAPTION_CLASS_TEMPLATE
from robustvlm.model_ref import TINY, ModelRef
from robustvlm.models.embedding import SPEC_FILE
from robustvlm.models.loading import load_vlm
from robustvlm.models.vision import VisionTowerEmbedder
from robustvlm.multiple_choice.build import read_questions
from robustvlm.report.task_signal import ShiftResult, TaskSignalSummary, write_report
from robustvlm.runs import claim_run_folder, read_jsonl, write_jsonl
from robustvlm.workflows.embed.train import embed_train
from robustvlm.workflows.finetune.train import train
from robustvlm.workflows.launchers import JobRunnerConfig, run_jobs
from robustvlm.workflows.mc_eval import evaluate_models, model_slug, write_results
from robustvlm.workflows.measure.robustness_fit import pair_benches, read_results
from robustvlm.workflows.measure.task_signal_data import CAPTION_ENV, SignalData, prepare_data

PROBE_FAMILY = "linear-probe"


@dataclass(frozen=True)
class Member:
    """One embedding model of a family: `steps` optimizer steps from init seed `seed`."""

    family: str
    vqa_share: float
    seed: int
    steps: int

    @property
    def name(self) -> str:
        return f"{self.family}-s{self.steps}-seed{self.seed}"


def plan(cfg: TaskSignalConfig) -> list[Member]:
    """Every (family, seed, budget), largest budgets first (they take longest)."""
    members = [Member(f, s, seed, b) for f, s in cfg.families.items() for seed in cfg.seeds for b in cfg.budgets]
    return sorted(members, key=lambda m: -m.steps)


def base_vlm(out: Path, cfg: TaskSignalConfig, data: SignalData) -> ModelRef:
    """The shared base VLM: `cfg.model` pretrained generatively (ERM, every part trained) for
    `base_steps` on data/base.jsonl, saved under base/. With `base_steps: 0`, a hub model is used
    as it is and a tiny model is only built (once, so every family shares it)."""
    run = out / "base"
    if cfg.base_steps == 0:
        if cfg.model.ref.kind != TINY:
            return cfg.model.ref
        final = run / "final"
        if not (final / "config.json").is_file():
            texts = [t for row in read_jsonl(data.base_jsonl) for t in (row["instruction"], row["target"])]
            model, processor = load_vlm(cfg.model.ref, tiny_options=cfg.model.tiny, corpus=texts)
            model.save_pretrained(final)
            processor.save_pretrained(final)
        return ModelRef.folder(final)
    raw = {
        "model": {"name": cfg.model.name, "trainable": "full", "tiny": cfg.model.tiny,
                  "trust_remote_code": cfg.model.trust_remote_code},
        "data": {"path": str(data.base_jsonl)},
        "method": "erm",
        "train": {"steps": cfg.base_steps, "lr": 3e-3, "weight_decay": 0.01,
                  "batch_size": 16, "sampler": "shuffle", "save_every": cfg.base_steps,
                  "keep_checkpoints": 1, "cpu_threads": 1, "seed": 0},
    }
    cfg_base = validate_config(raw, "task-signal base", RunConfig)
    if (run / "final" / "config.json").is_file():
        claim_run_folder(run, cfg_base, command="train", resume=True, write=False)
        return ModelRef.folder(run / "final")
    (out / "logs").mkdir(exist_ok=True)
    with (out / "logs" / "base.log").open("a", encoding="utf-8") as log, redirect_stdout(log), redirect_stderr(log):
        return ModelRef.folder(train(cfg_base, run, resume=True, progress=False).final_dir)


def member_config(cfg: TaskSignalConfig, member: Member, base: ModelRef, data: SignalData) -> EmbedRunConfig:
    """The `embed train` config of one member: the base with its tower frozen, the family's
    pairs, the experiment's training settings with this seed and budget."""
    caption_only = member.vqa_share == 0
    raw = {
        "model": {**cfg.model.model_dump(), "name": base.name, "tiny": {}},
        "data": {"path": str(data.family_jsonl[member.family])},
        "embed": {**cfg.embed.model_dump(), "caption_envs": [CAPTION_ENV],
                  "class_templates": [CAPTION_CLASS_TEMPLATE] if caption_only else ["{class}"]},
        "train": {**cfg.train.model_dump(), "steps": member.steps, "seed": member.seed,
                  "save_every": member.steps, "keep_checkpoints": 1, "cpu_threads": 1},
    }
    return validate_config(raw, f"task-signal member {member.name}", EmbedRunConfig)


Job = tuple[dict, str, list[str], str]  # (embed-train config, run folder, question files, log file)


def train_and_score(job: Job) -> str:
    """Train one member and score it on every question file, resuming whatever its folder holds
    (a finished member is only checked against its stored settings); its output goes to its log
    file. Returns its results.csv. Module-level, so worker processes can run it."""
    raw, run, benches, log_path = job
    torch.set_num_threads(1)
    cfg, folder = EmbedRunConfig.model_validate(raw), Path(run)
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a", encoding="utf-8") as log, redirect_stdout(log), redirect_stderr(log):
        if (folder / "final" / SPEC_FILE).is_file():
            claim_run_folder(folder, cfg, command="embed train", resume=True, write=False)
            final = folder / "final"
        else:
            final = embed_train(cfg, folder, resume=True, progress=False).final_dir
        return str(evaluate_models([ModelRef.folder(final)], benches, folder / "scores", resume=True, batch_size=32,
                                   allow_outside_root=True))  # benchmarks this run built


def run_members(jobs: list[Job], workers: int) -> list[Path]:
    """Run the jobs through the job runner, `workers` at a time in fresh processes (one after
    another in this process when 1); a failed member is named by its run folder."""
    paths = run_jobs(train_and_score, jobs, JobRunnerConfig(workers=workers),
                     name=lambda job: Path(job[1]).name, desc="models")
    return [Path(p) for p in paths]


def image_features(base: ModelRef, paths: list[str]) -> np.ndarray:
    """The base's frozen image features [n, tokens x d] (image tokens laid end to end)."""
    model, processor = load_vlm(base)
    embed = VisionTowerEmbedder(model, processor, normalize=False, pooling="flatten")
    return embed([load_image(p) for p in paths])


def probe_rows(out: Path, cfg: TaskSignalConfig, data: SignalData, base: ModelRef) -> list[dict]:
    """Fit each probe, score it on every question file (per-question rows under probes/),
    and return its results rows."""
    benches = {style: read_questions(path, allow_outside_root=True) for style, path in data.benches.items()}
    paths = [str(ex.image) for ex in data.train] + [str(q.image) for qs in benches.values() for q in qs]
    features = image_features(base, paths)
    train_x, offset = features[: len(data.train)], len(data.train)
    labels = [ex.target for ex in data.train]
    rows = []
    for n_train in cfg.probe.n_train:
        for seed in cfg.probe.seeds:
            name = f"probe-n{n_train}-seed{seed}"
            probe = fit_probe(train_x, labels, n_train=min(n_train, len(labels)), seed=seed, c=cfg.probe.c)
            start = offset
            for style, questions in benches.items():
                chosen = probe.choose(features[start : start + len(questions)], [q.options for q in questions])
                start += len(questions)
                scored = [{"id": q.id, "rotation": q.rotation, "answer": q.answer, "prediction": c,
                           "correct": c == q.answer} for q, c in zip(questions, chosen)]
                (out / "probes" / name).mkdir(parents=True, exist_ok=True)
                write_jsonl(out / "probes" / name / f"{style}.jsonl", scored)
                rows.append({"model": name, "family": PROBE_FAMILY, "method": "linear-probe", "bench": style,
                             **accuracy_summary(scored, circular=False).to_dict()})
    return rows


def _member_rows(results_csv: Path, member: Member) -> list[dict]:
    with results_csv.open(newline="", encoding="utf-8") as f:
        return [{**row, "model": member.name, "family": member.family} for row in csv.DictReader(f)]


def question_outcomes(out: Path, members: list[str], benches: list[str]) -> dict[str, dict[str, np.ndarray]]:
    """{member: {bench: its 0/1 outcomes, ordered by question id and rotation}} from the
    per-question rows of the members named `members`: embedding members (models/<name>/scores/)
    and probes (probes/<name>/)."""
    outcomes = {}
    for name in members:
        folder = out / "probes" / name
        if not folder.is_dir():
            folder = out / "models" / name / "scores" / model_slug(str(out / "models" / name / "final"))
        rows = {b: sorted(read_jsonl(folder / f"{b}.jsonl"), key=lambda r: (str(r["id"]), r["rotation"]))
                for b in benches}
        outcomes[name] = {b: np.array([bool(r["correct"]) for r in rs]) for b, rs in rows.items()}
    return outcomes


def analyse(out: Path, results_csv: Path, cfg: TaskSignalConfig) -> dict[str, ShiftResult]:
    """Per shift: the family lines, the lifts (each family over the caption family and over the
    probes, where both have a line; models and questions resampled) and every model against the
    probe line (against the line of all models when the probes have none)."""
    rows = read_results(results_csv)
    by_model = question_outcomes(out, sorted({r["model"] for r in rows}), [cfg.reference, *cfg.shifts])
    result = {}
    for shift in cfg.shifts:
        points = pair_benches(rows, cfg.reference, shift, str(results_csv))
        outcomes = {m: (o[cfg.reference], o[shift]) for m, o in by_model.items()}
        lines = family_lines(points)
        pairs = [(f, "caption") for f in cfg.families if f != "caption"] + [(f, PROBE_FAMILY) for f in cfg.families]
        lifts = [lift_between(points, f, base, n_boot=cfg.n_boot, outcomes=outcomes)
                 for f, base in pairs if f in lines and base in lines]
        baseline = PROBE_FAMILY if PROBE_FAMILY in lines else None
        models = fit_robustness(points, ref=cfg.reference, shift=shift, baseline=baseline, n_boot=cfg.n_boot)
        result[shift] = ShiftResult(shift, lines, lifts, models)
    return result


def load_task_signal_config(
    path: str | Path | None = None, *, quick: bool = False, overrides: list[str] | None = None
) -> TaskSignalConfig:
    """The built-in configs/task_signal.yaml with the YAML at `path` merged over it (a config
    names only what it changes), its `quick` part merged in with `quick`, then `key=value`
    overrides."""
    raw = yaml.safe_load(resources.files("robustvlm.configs").joinpath("task_signal.yaml").read_text())
    source = "configs/task_signal.yaml (built in)"
    if path is not None:
        raw, source = deep_merge(raw, read_yaml_mapping(path)), str(path)
    quick_part = raw.pop("quick", {}) or {}
    if quick:
        raw = deep_merge(raw, quick_part)
    return validate_config(apply_overrides(raw, overrides or []), source, TaskSignalConfig)


def run_task_signal(
    cfg: TaskSignalConfig, out_dir: str | Path, *, resume: bool = False, label: str = ""
) -> TaskSignalSummary:
    """Run the experiment into `out_dir` (see the module doc); returns its summary."""
    t0 = time.perf_counter()
    out = claim_run_folder(Path(out_dir).absolute(), cfg, command="robustness task-signal", resume=resume, may_differ=("workers",))
    torch.set_num_threads(1)
    data = prepare_data(out, cfg)
    print(f"task signal: {len(data.train)} training images, attributes {data.described}, "
          f"{data.n_questions} questions per style")
    base = base_vlm(out, cfg, data)
    members = plan(cfg)
    jobs = [(member_config(cfg, m, base, data).model_dump(mode="json"), str(out / "models" / m.name),
             [str(p) for p in data.benches.values()], str(out / "logs" / f"{m.name}.log")) for m in members]
    print(f"training and scoring {len(members)} embedding models, {cfg.workers} at a time")
    scored = run_members(jobs, cfg.workers)
    rows = [row for member, path in zip(members, scored) for row in _member_rows(path, member)]
    rows += probe_rows(out, cfg, data, base)
    results_csv = out / "results.csv"
    write_results(results_csv, rows)
    summary = TaskSignalSummary(
        label=label, config=cfg, described=data.described, n_train_images=len(data.train),
        n_questions=data.n_questions, results_csv=str(results_csv), shifts=analyse(out, results_csv, cfg),
        seconds=round(time.perf_counter() - t0, 1),
    )
    write_report(summary, out)
    print(f"report: {(out / 'report.md').absolute()} and {(out / 'report.html').absolute()} ({summary.seconds:.0f} s)")
    return summary
