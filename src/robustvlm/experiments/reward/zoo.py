"""`robustvlm demo reward --zoo`: the reward ladder started from a pretrained zoo VLM.

The reward demo's policy is a tiny Idefics3 fine-tuned from random weights; the paper's main
branch starts from a pretrained VLM that already reads the picture. Here every reward model starts
from a zoo member (`zoo:idefics3-siglip-m`, 0.852 zero-shot on Fashion-MNIST; `--quick`:
`zoo:quick-idefics3`). The zoo never saw `preferences`' shapes, so the data is
`preferences-fashion`: the same environments and text cues on Fashion-MNIST test-split scans
drawn as the zoo's clean domain, chosen = the scan's class, rejected = another class.

1. data/: `preferences-fashion`.
2. matrix/: `rm matrix` (standard, text-only, shortcut-aware) from the member, trained on each
   environment and tested on every one, every step logged; each shortcut-aware run writes its
   per-pair SFC weights (`sfc_pairs.jsonl`).
3. the ladder: rung 1 (linear, `experiments.reward.linear_rung`, as in the demo), rung 2 (heads on the
   member's frozen backbone, `experiments.reward.frozen_rung`; states cached in frozen/states.npz), rung 3 (the
   matrix's full models), and where the SFC weights fell step by step on the pairs whose cue fails
   and those whose cue agrees (`analysis.sfc_steps`).
4. results.json (`RewardZooResults`), report.md / report.html, sfc_steps.png.

No Best-of-N: the member answers with class names, not the statements the reward models rank.
Every step resumes (the matrix's finished runs, the cached states).
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from robustvlm.analysis.sfc_steps import matrix_sfc_steps
from robustvlm.data.synth import synthesize
from robustvlm.experiments.reward.frozen_rung import frozen_rung
from robustvlm.experiments.reward.linear_rung import linear_rung
from robustvlm.experiments.reward.paired import compare_losses
from robustvlm.experiments.reward.report import ladder_blocks, linear_rung_blocks
from robustvlm.experiments.reward.results import RewardZooPlan, RewardZooResults
from robustvlm.experiments.reward.run import (
    COMPARED,
    FROZEN_LR,
    cached_states,
    ladder_pairs,
    matrix_spec,
)
from robustvlm.experiments.reward.zoo_report import WINDOW_FULL, WINDOW_QUICK, sfc_step_blocks
from robustvlm.machine import write_results_json
from robustvlm.model_ref import ModelRef
from robustvlm.models.zoo_recipes import resolve_model_ref
from robustvlm.report.page import Heading, Paragraph, write_page
from robustvlm.report.reward_report import matrix_blocks
from robustvlm.report.smoke import page_title, smoke_verdict
from robustvlm.workflows.reward.matrix import logged_proxy, run_matrix

BENCHMARK = "preferences-fashion"


FULL_ZOO = RewardZooPlan("idefics3-siglip-m", n_per_env=300, seeds=(0, 1, 2), rm_steps=100, test_per_env=40,
                         jobs=2, frozen_steps=300, linear_n=2000, linear_steps=500)
QUICK_ZOO = RewardZooPlan("quick-idefics3", n_per_env=24, seeds=(0,), rm_steps=4, test_per_env=4, jobs=1,
                          frozen_steps=20, linear_n=1000, linear_steps=300)


def prepare_fashion(out: Path, n_per_env: int) -> Path:
    """`preferences-fashion` in OUT/data (reused when there with these settings)."""
    folder = out / "data"
    manifest = folder / "manifest.json"
    if manifest.is_file():
        info = json.loads(manifest.read_text(encoding="utf-8"))
        if info.get("benchmark") == BENCHMARK and info["envs"]["plain"]["train"] == n_per_env:
            return folder
    synthesize(BENCHMARK, folder, seed=0, n_per_env=n_per_env)
    return folder


def step_weights(out: Path, data: Path, plan: RewardZooPlan, envs: list[str]) -> dict[str, list[dict[str, Any]]]:
    """`sfc_steps` of the shortcut-aware runs under OUT/matrix: pooled ("all") and per seed."""
    return matrix_sfc_steps(out / "matrix", data, plan.seeds, envs)


def run_zoo_reward(out_dir: str | Path, *, quick: bool = False, member: str | None = None) -> RewardZooResults:
    """Run the zoo reward ladder into `out_dir` (see the module doc); `member`: another zoo VLM."""
    torch.set_num_threads(1)
    plan = QUICK_ZOO if quick else FULL_ZOO
    if member:
        plan = replace(plan, member=member)
    policy = Path(resolve_model_ref(ModelRef.zoo(plan.member)).location)  # a clear error when not built
    out = Path(out_dir).absolute()
    t0 = time.perf_counter()
    data = prepare_fashion(out, plan.n_per_env)
    spec = matrix_spec(data, policy, plan)
    spec["base"]["train"]["log_every"] = 1
    matrix = run_matrix(spec, out / "matrix")
    linear = linear_rung(plan.seeds, n=plan.linear_n, steps=plan.linear_steps)
    pairs = ladder_pairs(data, plan)
    frozen = frozen_rung(pairs, cached_states(out, policy, pairs), plan.seeds, steps=plan.frozen_steps, lr=FROZEN_LR)
    envs = matrix.results.train_envs
    results = RewardZooResults(
        quick=quick, seconds=0.0, plan=plan, matrix=matrix.results,
        comparison=compare_losses(matrix.results, matrix.runs, *COMPARED), linear=linear, frozen=frozen,
        full_proxy=logged_proxy(out / "matrix", "shortcut_aware", list(plan.seeds), envs),
        steps=step_weights(out, data, plan, envs))
    results.seconds = round(time.perf_counter() - t0, 1)
    write_results_json(out, results.to_dict())
    title = f"Shortcut-aware reward models from {ModelRef.zoo(plan.member).name}"
    verdict = smoke_verdict("every loss trained from the zoo member on every environment and was tested on all of "
                            "them, and each rung of the reward ladder ran") if quick else []
    blocks = [Heading(page_title(title, quick), 1), *verdict,
              Paragraph(f"`{BENCHMARK}` ({plan.n_per_env} training pairs per environment); every reward model "
                        f"starts from `{ModelRef.zoo(plan.member).name}`; each loss trained {plan.rm_steps} steps (8 pairs) on one "
                        f"environment, tested on {plan.test_per_env} pairs of every environment, "
                        f"{len(plan.seeds)} seed(s). Wall time: {results.seconds:.0f} s."),
              *matrix_blocks(matrix.results, out, points=matrix.points), *linear_rung_blocks(linear),
              *ladder_blocks(linear, frozen, results.full,
                             frozen_setup=f"{plan.frozen_steps} steps of 8 pairs, Adam at lr {FROZEN_LR}"),
              *sfc_step_blocks(results.steps, out, window=WINDOW_QUICK if quick else WINDOW_FULL)]
    md, html = write_page(blocks, out, title=page_title(title, quick))
    print(f"\n{results.seconds:.0f} s; report: {md} and {html}")
    return results
