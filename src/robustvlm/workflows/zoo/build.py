"""`robustvlm zoo build`: build members deterministically and resumably.

A member is built in `.<folder>.partial/` next to its final folder (`models.zoo_recipes.member_dir`),
one `stage-<i>-<name>/` per finished stage (a `save_pretrained` folder and `stage.json`); a
killed build resumes after its last finished stage, and every stage starts from the weights the
previous one saved, so a resumed build equals an uninterrupted one. The finished member is the
last stage's folder plus its model card (`README.md`) and `zoo_member.json`, renamed into place
at once. The card records the sha256 of the weights (`model.safetensors`); a member whose card
reads and whose weights match it is never rebuilt, while a damaged one (a torn card, weights
that do not match) is listed as damaged and rebuilt by the next build. A changed recipe has a
new key, hence a new folder. Training runs on one thread (bit-equal weights on a rebuild).
"""

from __future__ import annotations

import json
import multiprocessing
import shutil
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from filelock import FileLock

from robustvlm.machine import with_machine
from robustvlm.model_ref import ZOO, ModelRef
from robustvlm.models.zoo_recipes import (
    FULL,
    QUICK,
    QUICK_ZOO2,
    QUICK_ZOO3,
    ZOO2,
    ZOO3,
    Recipe,
    member_dir,
    recipe,
)
from robustvlm.runs import atomic_folder
from robustvlm.workflows.zoo.card import render_card
from robustvlm.workflows.zoo.data import training_pool
from robustvlm.workflows.zoo.listing import MEMBER_FILE, WEIGHTS_FILE, member_state, sha256_of
from robustvlm.workflows.zoo.members import (
    CONTEXT_TRIALS,
    defined_label_accuracy,
    fresh_model,
    heldout_accuracy,
    load_stage,
    param_groups,
    set_trainable,
    stage_loss,
    stages,
)
from robustvlm.workflows.zoo.steps import StageResult, run_stage

STAGE_FILE = "stage.json"


@dataclass(frozen=True)
class Built:
    """A member's folder and what its card says; `reused` when it was already built."""

    name: str
    folder: Path
    info: dict
    reused: bool


def selected(quick: bool, members: Sequence[str] | None) -> list[Recipe]:
    """The recipes to build: those named, else the quick set (with Zoo II's and Zoo III's quick
    members, as `zoo list` shows it and the zoo demos' `--quick` use it) or the full zoo (with Zoo
    II's and Zoo III's members)."""
    if members:
        return [recipe(name) for name in members]
    return list((*QUICK, *QUICK_ZOO2, *QUICK_ZOO3) if quick else (*FULL, *ZOO2, *ZOO3))


def build_members(recipes: Sequence[Recipe], jobs: int = 1) -> list[Built]:
    """Build each recipe (its zoo tower first) unless built, in `jobs` processes of one thread
    each; returns them in the order given."""
    if jobs > 1 and len(recipes) > 1:
        return _build_in_processes(recipes, jobs)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return [build_member(r) for r in recipes]
    finally:
        torch.set_num_threads(threads)


def _build_in_processes(recipes: Sequence[Recipe], jobs: int) -> list[Built]:
    """`build_members` over `jobs` worker processes: towers first, then the rest longest first,
    so a VLM seldom waits on its tower (when it does, the tower's lock holds it back)."""
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {i: pool.submit(build_members, [recipes[i]]) for i in build_order(recipes)}
        return [futures[i].result()[0] for i in range(len(recipes))]


def build_order(recipes: Sequence[Recipe]) -> list[int]:
    """Indices of `recipes` in the order the worker processes take them: dual encoders (the
    towers) first, then the VLMs, each longest first (`build_cost`)."""
    return sorted(range(len(recipes)), key=lambda i: (recipes[i].is_vlm, -build_cost(recipes[i])))


def build_cost(r: Recipe) -> float:
    """A rough relative cost of building `r`: the training steps of all its stages (the
    curricula's text and episode stages included) times batch size times width squared; for
    ordering only."""
    steps = (r.steps + r.align_steps + r.recall_steps + r.episode_steps + r.chat_recall_steps + r.named_steps
             + r.project_steps)
    return steps * r.batch_size * max(r.width, r.vision_width) ** 2


def build_member(r: Recipe) -> Built:
    """Build member `r` (see the module docstring); one process at a time per member (a lock
    file next to its folder), so concurrent builds share their towers."""
    final = member_dir(r)
    tower = r.tower_ref
    if tower is not None and tower.kind == ZOO:
        build_member(recipe(tower.location))
    if r.init_member is not None:
        build_member(recipe(r.init_member))
    final.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(final.with_name(f".{final.name}.lock")):
        info, damage = member_state(final)
        if info is not None:
            return Built(r.name, final, info, reused=True)
        if damage:
            print(f"{ModelRef.zoo(r.name).name}: {damage}: rebuilding it", flush=True)
            shutil.rmtree(final)
        return _build_unlocked(r, final)


def _build_unlocked(r: Recipe, final: Path) -> Built:
    """Run `r`'s unfinished stages, score it, and rename it into `final` with its card."""
    work = final.with_name(f".{final.name}.partial")
    results: list[dict] = []
    previous: Path | None = None
    for index, (stage, steps) in enumerate(stages(r)):
        folder = work / f"stage-{index}-{stage}"
        if not (folder / STAGE_FILE).is_file():
            print(f"{r.name}: stage {stage} ({steps} steps)", flush=True)
            model, processor = fresh_model(r) if previous is None else load_stage(r, previous)
            set_trainable(r, stage, model)
            pool = training_pool(r.n_images, r.seed, augmented=r.augment)
            objective = stage_loss(r, stage, model, processor, pool)
            result = run_stage(model, objective.loss_of, steps=steps, lr=r.lr, seed=r.seed * 1000 + index,
                               label=f"{r.name}/{stage}", groups=param_groups(r, stage, model),
                               schedule_steps=r.recall_schedule if stage == "recall" else None)
            curve = objective.curve.report() if objective.curve else {}
            with atomic_folder(folder) as tmp:
                model.save_pretrained(tmp)
                processor.save_pretrained(tmp)
                (tmp / STAGE_FILE).write_text(json.dumps({"stage": stage, **asdict(result), **curve}),
                                              encoding="utf-8")
        results.append(json.loads((folder / STAGE_FILE).read_text(encoding="utf-8")))
        previous = folder
    assert previous is not None  # every recipe has a stage
    model, processor = load_stage(r, previous)
    info = {
        "name": r.name, "key": r.key(), "recipe": r.model_dump(), "stages": results,
        "cpu_seconds": round(sum(s["cpu_seconds"] for s in results), 1),
        "heldout_accuracy": heldout_accuracy(r, model, processor), "eval_images": r.eval_images,
        "n_train_images": len(training_pool(r.n_images, r.seed)),
        "weights_sha256": sha256_of(previous / WEIGHTS_FILE),
    }
    if r.defined_label_share > 0 or r.episode_share > 0:
        info["defined_label_accuracy"] = defined_label_accuracy(r, model, processor)
        info["defined_label_trials"] = CONTEXT_TRIALS
    with atomic_folder(final) as tmp:
        shutil.copytree(previous, tmp)
        (tmp / STAGE_FILE).unlink()
        (tmp / MEMBER_FILE).write_text(json.dumps(with_machine(info), indent=2), encoding="utf-8")
        (tmp / "README.md").write_text(render_card(info), encoding="utf-8")
    shutil.rmtree(work, ignore_errors=True)
    print(f"{r.name}: held-out accuracy {info['heldout_accuracy']:.3f}, {info['cpu_seconds']} CPU s -> {final}")
    return Built(r.name, final, info, reused=False)


__all__ = ["Built", "StageResult", "build_member", "build_members", "selected"]
