"""`robustvlm demo ladder`: where invariant training stops beating ERM, rung by rung.

The same Colored MNIST data (`data.colored_mnist`: the IRM paper's construction on real images)
and the same objective classes (`objectives`, the ones `train` uses) on models of growing size:

- rung `pixels`: the IRM paper's MLP on the 2 x 14 x 14 pixels (`linear.mlp`), its protocol;
- rung `tower:<model>`: the same MLP head on pooled features of a frozen vision tower (the tiny
  VLM's own, `tiny:idefics3`; a tiny CLIP's, `tiny:clip`; both random-weight offline models),
  each image given to the tower as an RGB picture (channel 0 red, channel 1 green), features
  standardised with the training rows' mean and sd;
- rung `vlm:<mode>:<model>` (`ladder_vlm`): the generative VLM asked the benchmark's
  two-option question about each picture, trained on the answer tokens as `train` trains it:
  `head`, backbone frozen, projector and a LoRA on the last decoder layer trained (the issue's
  rung 3); `lora` and `full` (rung 4), with mini-batches, AdamW and `train`'s schedule
  (`VLM_PLAN`).

Methods: ERM, IRMv1, V-REx, BIRM, Dynamic BIRM, and the grayscale oracle (ERM on inputs whose
colour is removed: the two channels summed). Hyperparameters: the IRM paper's selected ones
(`PAPER`; the MLP narrower on CPU, stated in the report) with its penalty schedule for every
annealed method (`method_hparams`: weight 91257 after 190 steps, 1 before, no optimizer reset;
IRMv1 with the plain square as the paper computes it); Dynamic BIRM warms up for the same 190
steps and sets its own weight. Not tuned per method. One data draw (seed 0); model seeds `seeds`.

Each run is evaluated every `eval_every` steps on every environment and on a held-out tenth of
each training environment; three readings per run: the final step (the paper's protocol), the
step that training-domain validation picks (best held-out accuracy of the training
environments), and the oracle's pick (best accuracy on the test environment itself). Each
evaluation also records which test pictures the run answered right (predictions.jsonl), so that
the verdicts can pair methods picture by picture over the seeds (`experiments.ladder.paired`).
Runs are kept in `jobs/` as they finish, their per-picture answers with them: an interrupted
demo resumes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np
import torch

from robustvlm.analysis.env_inference import cluster_split, eiil_split, loss_split, purity
from robustvlm.analysis.selection import colour_rule_prototypes
from robustvlm.data.colored_mnist import ColouredEnv, colored_mnist
from robustvlm.data.synth.shortcut import COLOUR_ENVS, LABEL_NOISE
from robustvlm.errors import ConfigError
from robustvlm.experiments.ladder.paired import ladder_paired, to_bits
from robustvlm.experiments.ladder.plan import FULL, MODES, PAPER, LadderPlan, VLMRungPlan
from robustvlm.experiments.ladder.readings import ORACLE, READINGS, summarize
from robustvlm.experiments.ladder.results import LadderResults, SplitPurity, ZeroShot
from robustvlm.experiments.ladder.rung import PIXELS, TOWER, VLM, Rung, cell_id
from robustvlm.experiments.ladder.vlm import (
    rgb_pictures,
    vlm_evaluations,
)
from robustvlm.experiments.ladder.zero_shot import TEN_WAY_PICTURES, zero_shot
from robustvlm.linear.mlp import MLPFit, fit_mlp
from robustvlm.machine import write_results_json
from robustvlm.model_ref import TINY, ModelRef
from robustvlm.models.backends import load_backend
from robustvlm.models.zoo_recipes import RECIPES, recipe
from robustvlm.objectives import LADDER, REGISTRY, Objective, applicable_methods, build_objective
from robustvlm.workflows.launchers import JobRunnerConfig, run_jobs

TRAIN_ENVS = tuple(e.name for e in COLOUR_ENVS if not e.ood)
TEST_ENVS = tuple(e.name for e in COLOUR_ENVS if e.ood)
PROTOTYPES = colour_rule_prototypes({e.name: e.agreement for e in COLOUR_ENVS}, LABEL_NOISE)
GIVEN = "given"
INFERRED = ("eiil", "loss-split", "cluster")
INFERRED_METHODS = ("irm", "dynamic_birm")
JOBS_DIR = "jobs"
PREDICTIONS_FILE = "predictions.jsonl"
FEATURES_DIR = "features"

def method_hparams(anneal: int, weight: float = PAPER["penalty_weight"]) -> dict[str, dict[str, Any]]:
    """Each method's hyperparameters: the paper's penalty schedule switching at `anneal` steps
    (to `weight`, by default the paper's), as each registered objective takes it
    (`Objective.penalty_schedule`; one without a schedule is not on the ladder), and the oracle's."""
    schedules = {name: cls.penalty_schedule(anneal, weight) for name, cls in REGISTRY.items()}
    return {**{name: hp for name, hp in schedules.items() if hp is not None}, ORACLE: {}}


def ladder_methods() -> tuple[str, ...]:
    """The methods the ladder trains: every registered objective that declares it applies to the
    ladder (`Objective.applies_to`; each takes the paper's schedule, `method_hparams`), then the
    grayscale oracle."""
    return (*applicable_methods(LADDER), ORACLE)


def vlm_hparams(vlm: VLMRungPlan) -> dict[str, dict[str, Any]]:
    """The VLM rungs' method hyperparameters: the paper's schedule at `vlm.anneal` steps to
    `vlm.penalty_weight`; Dynamic BIRM's controller averaging `vlm.dynamic_birm_smooth`."""
    hparams = method_hparams(vlm.anneal, vlm.penalty_weight)
    hparams["dynamic_birm"] = {**hparams["dynamic_birm"], "smooth": vlm.dynamic_birm_smooth}
    return hparams


def checked_plan(plan: LadderPlan) -> LadderPlan:
    """`plan` with its methods (of `ladder_methods()`) in their order and each seed once; a
    ConfigError names an unknown method or VLM rung mode, or a zoo member that is not a VLM. A
    run's results do not depend on which other methods or seeds run beside it."""
    unknown = [m for m in plan.modes if m not in MODES]
    if unknown:
        raise ConfigError(f"unknown VLM rung mode(s) {unknown}: choose from {list(MODES)}")
    for name in plan.members if plan.zoo else ():
        if not recipe(name).is_vlm:
            raise ConfigError(f"zoo member '{name}' is a dual encoder: the ladder's VLM rungs need a zoo VLM "
                              f"(one of {sorted(r.name for r in RECIPES.values() if r.is_vlm)})")
    if plan.methods is not None:
        known = ladder_methods()
        unknown = [m for m in plan.methods if m not in known]
        if unknown or not plan.methods:
            raise ConfigError(f"demo ladder: unknown method(s) {unknown or 'none given'}: choose from {list(known)}")
        plan = replace(plan, methods=tuple(m for m in known if m in plan.methods))
    return replace(plan, seeds=tuple(dict.fromkeys(plan.seeds)))


@dataclass
class RungData:
    """Model inputs of one (source, rung): per environment [n, d] float32 inputs, [n] labels;
    `grey`: the same with the colour removed (the oracle's inputs)."""

    inputs: dict[str, np.ndarray]
    grey: dict[str, np.ndarray]
    labels: dict[str, np.ndarray]
    dim: int = field(init=False)

    def __post_init__(self) -> None:
        self.dim = next(iter(self.inputs.values())).shape[1]


def rung_data(envs: list[ColouredEnv], rung: Rung) -> RungData:
    """The inputs of a rung (module doc) for the four environments (a VLM rung's: the pixels,
    drawn as pictures by `ladder_vlm`)."""
    labels = {e.name: e.labels for e in envs}
    if rung.kind in (PIXELS, VLM):
        return RungData({e.name: e.inputs.reshape(len(e.inputs), -1) for e in envs},
                        {e.name: e.inputs.sum(1).reshape(len(e.inputs), -1) for e in envs}, labels)
    if rung.kind != TOWER or rung.model is None:
        raise ValueError(f"unknown rung {rung!r}")
    backend = load_backend(rung.model)
    torch.manual_seed(0)
    kinds = {}
    for grey in (False, True):
        raw = {e.name: backend.embed_images(rgb_pictures(e.inputs.sum(1, keepdims=True) if grey else e.inputs),
                                            batch_size=256, normalize=False)
               for e in envs}
        train = np.concatenate([raw[name] for name in TRAIN_ENVS])
        mean, sd = train.mean(0), train.std(0) + 1e-6
        kinds[grey] = {name: ((x - mean) / sd).astype(np.float32) for name, x in raw.items()}
    return RungData(kinds[False], kinds[True], labels)


def _split(n: int, holdout: float) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, held-out rows) of an environment of n rows: the last `holdout` share held out."""
    cut = n - max(1, int(round(n * holdout)))
    return np.arange(cut), np.arange(cut, n)


def run_one(job: tuple[str, Rung, str, int, str], plan: LadderPlan, features: Path, *,
            hparams: Mapping[str, Any] | None = None,
            wrap: Callable[[Objective], Objective] | None = None) -> dict[str, Any]:
    """Train one (source, rung, method, seed, environments) model on one torch thread; its
    evaluations and `cpu_s`, the CPU seconds it took. Environments `given` are the data's; an
    `INFERRED` split replaces them on the training rows (the held-out rows and the test
    environments stay as they are). `hparams` update the method's plan hyperparameters and
    `wrap` wraps its objective (`ladder_trace`: a run traced step by step)."""
    cpu = time.process_time()
    torch.set_num_threads(1)
    source, rung, method, seed, envs = job
    data = np.load(features / _feature_file(source, rung), allow_pickle=False)
    kind = "grey" if method == ORACLE else "inputs"
    inputs = {name: data[f"{kind}/{name}"] for name in (*TRAIN_ENVS, *TEST_ENVS)}
    labels = {name: data[f"labels/{name}"] for name in (*TRAIN_ENVS, *TEST_ENVS)}
    splits = {name: _split(len(labels[name]), plan.holdout) for name in TRAIN_ENVS}
    x = np.concatenate([inputs[n][splits[n][0]] for n in TRAIN_ENVS])
    y = np.concatenate([labels[n][splits[n][0]] for n in TRAIN_ENVS])
    env = np.concatenate([np.full(len(splits[n][0]), i) for i, n in enumerate(TRAIN_ENVS)])
    env_names = list(TRAIN_ENVS)
    if envs != GIVEN:
        env = np.load(features / _inferred_file(source, rung))[envs]
        env_names = [f"{envs}-{i}" for i in range(int(env.max()) + 1)]
    vlm = rung.kind == VLM
    evaluations: list[dict[str, Any]]
    planned = (vlm_hparams(plan.vlm) if vlm else method_hparams(plan.anneal))[method]
    objective = build_objective("erm" if method == ORACLE else method, env_names, {**planned, **(hparams or {})})
    objective = wrap(objective) if wrap is not None else objective
    if vlm:
        evaluations = vlm_evaluations(objective, rung, source, seed, plan.vlm, inputs, labels, splits)
        return {"source": source, "rung": rung.id, "method": method, "seed": seed, "envs": envs, "diverged": False,
                "evaluations": evaluations, "cpu_s": round(time.process_time() - cpu, 1)}
    evaluations = []

    def evaluate(step: int, fit: MLPFit) -> None:
        evaluations.append({
            "step": step,
            "acc": {n: fit.accuracy(inputs[n], labels[n]) for n in (*TRAIN_ENVS, *TEST_ENVS)},
            "val": {n: fit.accuracy(inputs[n][splits[n][1]], labels[n][splits[n][1]]) for n in TRAIN_ENVS},
            "correct": {n: to_bits(fit.correct(inputs[n], labels[n])) for n in TEST_ENVS},
        })

    fit = fit_mlp(objective, x, y, env, hidden=plan.hidden, lr=PAPER["lr"], l2=PAPER["l2"], steps=plan.steps,
                  seed=seed, eval_every=plan.eval_every, on_eval=evaluate)
    return {"source": source, "rung": rung.id, "method": method, "seed": seed, "envs": envs,
            "diverged": fit.diverged, "evaluations": evaluations, "cpu_s": round(time.process_time() - cpu, 1)}


def run_plan(plan: LadderPlan) -> LadderPlan:
    """The plan a run is handed (and its kept result keyed by): `plan` without what no run reads,
    `infer_on` and which methods and seeds run beside it, so that a run kept by one call is found
    by another with or without --inferred-envs, --methods or --seeds."""
    return replace(plan, inferred_envs=False, infer_on=(), methods=None, seeds=())


def _feature_file(source: str, rung: Rung) -> str:
    return f"{source}__{rung.id.replace(':', '_')}.npz"


def prepare_features(plan: LadderPlan, folder: Path) -> None:
    """Write each (source, rung)'s inputs to `folder` once (a re-run reuses them)."""
    folder.mkdir(parents=True, exist_ok=True)
    for source, rung in plan.cells:
        path = folder / _feature_file(source, rung)
        if path.is_file():
            continue
        vlm = rung.kind == VLM
        envs = colored_mnist(source, seed=0, limit=plan.vlm.per_env if vlm else plan.per_env,
                             test_pictures=plan.test_pictures if vlm else None)
        data = rung_data(envs, rung)
        arrays = {f"{kind}/{name}": getattr(data, kind)[name] for kind in ("inputs", "grey", "labels")
                  for name in data.labels}
        arrays.update({f"agrees/{e.name}": (e.colour == e.labels).astype(np.int64) for e in envs})
        tmp = path.with_suffix(".tmp.npz")
        np.savez(tmp, **arrays)
        tmp.rename(path)


def _inferred_file(source: str, rung: Rung) -> str:
    return f"envs__{_feature_file(source, rung)}"


def training_rows(data: Any, plan: LadderPlan) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """(inputs, labels, {"given": env ids, "colour": 1 where the colour agrees with the label})
    of the training rows of a rung's saved data, in `run_one`'s order."""
    xs, ys, given, agrees = [], [], [], []
    for i, name in enumerate(TRAIN_ENVS):
        rows = _split(len(data[f"labels/{name}"]), plan.holdout)[0]
        xs.append(data[f"inputs/{name}"][rows])
        ys.append(data[f"labels/{name}"][rows])
        given.append(np.full(len(rows), i))
        agrees.append(data[f"agrees/{name}"][rows])
    return np.concatenate(xs), np.concatenate(ys), {"given": np.concatenate(given), "colour": np.concatenate(agrees)}


def prepare_inferred_envs(plan: LadderPlan, folder: Path) -> dict[str, dict[str, SplitPurity]]:
    """For each `plan.infer_on` cell: an ERM reference model (seed 0, the rung's protocol) on the
    pooled training rows, then its `INFERRED` splits (`analysis.env_inference`: EIIL from its
    per-example scale gradients, a loss split at the median, k-means of its penultimate
    features), saved for `run_one`; returns {cell: {split: its purity and sizes}}."""
    report: dict[str, dict[str, SplitPurity]] = {}
    for source, rung in plan.infer_on:
        path = folder / _inferred_file(source, rung)
        data = np.load(folder / _feature_file(source, rung))
        x, y, truth = training_rows(data, plan)
        if not path.is_file():
            torch.manual_seed(0)
            reference = fit_mlp(build_objective("erm", ["pooled"]), x, y, np.zeros(len(y), dtype=np.int64),
                                hidden=plan.hidden, lr=PAPER["lr"], l2=PAPER["l2"], steps=plan.steps, seed=0)
            with torch.no_grad():
                inputs = torch.from_numpy(x).float()
                logits = reference.model(inputs).double().numpy()
                hidden = reference.model.body(inputs).numpy()
            prob = 1 / (1 + np.exp(-logits))
            losses = -(y * np.log(prob + 1e-12) + (1 - y) * np.log(1 - prob + 1e-12))
            splits = {"eiil": eiil_split((prob - y) * logits), "loss-split": loss_split(losses),
                      "cluster": cluster_split(hidden)}
            tmp = path.with_suffix(".tmp.npz")
            np.savez(tmp, **splits)  # type: ignore[arg-type]  # numpy's stub reads **splits as allow_pickle
            tmp.rename(path)
        splits = np.load(path)
        report[cell_id(source, rung)] = {
            name: SplitPurity(purity_given=purity(splits[name], truth["given"]),
                              purity_colour=purity(splits[name], truth["colour"]),
                              sizes=np.bincount(splits[name]).tolist())
            for name in INFERRED
        }
    return report


def pretrained_models(plan: LadderPlan) -> list[tuple[str, ModelRef]]:
    """(source, model) of every VLM rung whose model is pretrained (not `tiny:`), once each."""
    return list(dict.fromkeys((source, rung.model) for source, rung in plan.cells
                              if rung.kind == VLM and rung.model is not None and rung.model.kind != TINY))


def prepare_zero_shot(plan: LadderPlan, folder: Path) -> dict[str, ZeroShot]:
    """{"source/model": its `ZeroShot`} of each pretrained VLM rung's model before any
    fine-tuning (`ladder_zero_shot`; the ten-way question on a fifth of the test pictures, at most
    `TEN_WAY_PICTURES`), saved in `folder` for a re-run."""
    readings = {}
    for source, model in pretrained_models(plan):
        path = folder / f"zero_shot__{source}__{model.name.replace(':', '_').replace('/', '_')}.json"
        if not path.is_file():
            envs = colored_mnist(source, seed=0, limit=plan.vlm.per_env, test_pictures=plan.test_pictures)
            pictures = min(TEN_WAY_PICTURES, len(envs[-1].labels) // 5)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(asdict(zero_shot(model, source, envs, pictures))), encoding="utf-8")
            tmp.rename(path)
        readings[f"{source}/{model.name}"] = ZeroShot(**json.loads(path.read_text(encoding="utf-8")))
    return readings


def cpu_seconds(runs: list[dict[str, Any]], prepare: float) -> dict[str, float]:
    """CPU seconds of the demo's parts: `prepare` (features and inferred environments, this
    process), each source/rung's runs on the given environments, and the runs on inferred ones
    (`inferred`); runs kept from an earlier call count what they took then."""
    parts = {"prepare": prepare}
    for run in runs:
        part = f"{run['source']}/{run['rung']}" if run["envs"] == GIVEN else "inferred"
        parts[part] = parts.get(part, 0.0) + run.get("cpu_s", 0.0)
    return {part: round(seconds, 1) for part, seconds in parts.items()}


def write_runs(runs: Sequence[Mapping[str, Any]], out: Path) -> None:
    """runs.jsonl (each run without its per-picture answers) and PREDICTIONS_FILE: one row per
    run, evaluation and test environment, {"source", "rung", "method", "seed", "envs", "step",
    "env", "correct"} ("correct": one character per picture in the environment's order, "1"
    where right; `experiments.ladder.paired.to_bits`). Both are rewritten from the kept runs."""
    with (out / "runs.jsonl").open("w", encoding="utf-8") as f:
        for run in runs:
            evaluations = [{k: v for k, v in e.items() if k != "correct"} for e in run["evaluations"]]
            f.write(json.dumps({**run, "evaluations": evaluations}) + "\n")
    with (out / PREDICTIONS_FILE).open("w", encoding="utf-8") as f:
        for run in runs:
            key = {k: run[k] for k in ("source", "rung", "method", "seed", "envs")}
            for e in run["evaluations"]:
                for env, bits in e.get("correct", {}).items():
                    f.write(json.dumps({**key, "step": e["step"], "env": env, "correct": bits}) + "\n")


def run_ladder_demo(out_dir: str | Path, plan: LadderPlan = FULL, *, progress: bool = True) -> LadderResults:
    """Run the ladder `plan` (`experiments.ladder.plan`'s presets), write results.json, runs.jsonl,
    predictions.jsonl (`write_runs`), report.md/html and the figure into `out_dir`; returns the results results.json holds.

    The plan's `infer_on` cells (environments inferred from data, and the methods trained on
    them) run only with `inferred_envs`: they are an addition to the rungs, not part of them.
    """
    from robustvlm.experiments.ladder.report import write_ladder_report

    methods = plan.methods or ladder_methods()
    plan = replace(plan, methods=methods)
    if not plan.inferred_envs:
        plan = replace(plan, infer_on=())
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t0, cpu0 = time.perf_counter(), time.process_time()
    prepare_features(plan, out / FEATURES_DIR)
    inference = prepare_inferred_envs(plan, out / FEATURES_DIR)
    zero_shot_readings = prepare_zero_shot(plan, out / FEATURES_DIR)
    prepare_cpu = time.process_time() - cpu0
    jobs = [(source, rung, method, seed, GIVEN)
            for (source, rung), method, seed in product(plan.cells, methods, plan.seeds)]
    jobs += [(source, rung, method, seed, envs) for (source, rung), envs, method, seed
             in product(plan.infer_on, INFERRED, INFERRED_METHODS, plan.seeds)]
    train = partial(run_one, plan=run_plan(plan), features=out / FEATURES_DIR)
    runs = run_jobs(train, jobs,
                    JobRunnerConfig(workers=plan.workers), name=lambda job: "/".join(map(str, job)),
                    store=out / JOBS_DIR, desc="models", progress=progress)
    seconds = time.perf_counter() - t0
    write_runs(runs, out)
    given = [r for r in runs if r["envs"] == GIVEN]
    results = LadderResults(
        quick=plan.quick, seconds=round(seconds, 1), cpu_seconds=cpu_seconds(runs, prepare_cpu), plan=plan,
        paper=dict(PAPER), method_hparams=method_hparams(plan.anneal), vlm_method_hparams=vlm_hparams(plan.vlm),
        train_envs=list(TRAIN_ENVS), test_envs=list(TEST_ENVS),
        summary=summarize(given, TRAIN_ENVS, TEST_ENVS, PROTOTYPES),
        paired={reading: ladder_paired(given, TRAIN_ENVS, reading, envs=TEST_ENVS) for reading in READINGS},
        inference=inference, zero_shot=zero_shot_readings,
        inferred_summary={envs: summarize([r for r in runs if r["envs"] == envs], TRAIN_ENVS, TEST_ENVS, PROTOTYPES)
                          for envs in INFERRED if plan.infer_on})
    write_results_json(out, results.to_dict())
    md, html = write_ladder_report(results, out)
    print(f"report: {md.absolute()} and {html.absolute()} ({seconds:.0f} s)")
    return results
