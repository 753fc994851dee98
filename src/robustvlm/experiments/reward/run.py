"""`robustvlm demo reward`: the shortcut-aware reward-model paper in miniature, on built-in data.

1. data/: the `preferences` benchmark (environments clause, long, short, plain).
2. policy/: a tiny Idefics3 fine-tuned (ERM) to describe the training images ("There are two red
   circles."): the policy Best-of-N samples from, and the initial weights of every reward model,
   as reward models usually start from an SFT model. (Random tiny backbones never learned to look
   at the image within a demo's budget; the fine-tuned one names colours, which most rejected
   responses get wrong.)
3. matrix/: `rm matrix` with standard, text-only and shortcut-aware losses, trained on each
   environment and tested on every one, several seeds; SFD, correlations, lengths.
4. bon/: K candidates per prompt from the policy for the `plain` test prompts (no text cue),
   scored by the standard and the shortcut-aware models trained on the `long` environment (a
   length shortcut) of every seed; gold = chrF against the reference answer.
5. the reward ladder: rung 1, linear rewards on synthetic features (`experiments.reward.linear_rung`); rung
   2, reward heads on the frozen policy backbone (`experiments.reward.frozen_rung`; its hidden states cached
   in frozen/states.npz), on the matrix's training and test pairs; rung 3, the matrix's full
   models, with where their SFC weights fell read from the shortcut-aware runs' logs.
6. report.md / report.html / results.json: the matrices, SFD and correlation, the Best-of-N
   curves, the ladder's tables, and a verdict computed from the numbers: whether shortcut-aware
   training lowered SFD and raised o.o.d. accuracy here, seed by seed.

Every step resumes: re-running reuses the data, the policy, finished runs and scores.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch

from robustvlm.analysis.reward import seed_spread
from robustvlm.config import RunConfig, validate_config
from robustvlm.data.preferences import PreferencePair, load_pairs
from robustvlm.data.synth import synthesize
from robustvlm.data.synth.preferences import statement
from robustvlm.experiments.reward.frozen_rung import frozen_rung, frozen_states
from robustvlm.experiments.reward.linear_rung import linear_rung
from robustvlm.experiments.reward.paired import compare_losses
from robustvlm.experiments.reward.report import demo_blocks, ladder_blocks, linear_rung_blocks
from robustvlm.experiments.reward.results import (
    BonResult,
    RewardDemoPlan,
    RewardDemoSummary,
    RewardZooPlan,
)
from robustvlm.machine import write_results_json
from robustvlm.model_ref import ModelRef
from robustvlm.report.page import Heading, write_page
from robustvlm.report.smoke import page_title
from robustvlm.workflows.finetune.train import train
from robustvlm.workflows.reward.bon import bon_results
from robustvlm.workflows.reward.matrix import logged_proxy, run_matrix
from robustvlm.workflows.reward.sample import Sampling, sample_candidates
from robustvlm.workflows.reward.score import score_candidates

TINY = {"hidden_size": 64, "vocab_size": 400}
BON_TRAIN_ENV, BON_TEST_ENV = "long", "plain"
COMPARED = ("standard", "shortcut_aware")
#: the report's title
TITLE = "Shortcut-aware reward models: the demo"
#: rung 2's heads: batches of 8 pairs, Adam at FROZEN_LR (chosen by training accuracy, README)
FROZEN_STEPS, FROZEN_LR = 300, 0.01


FULL = RewardDemoPlan(n_per_env=300, seeds=(0, 1, 2), policy_steps=250, rm_steps=100, test_per_env=40,
                      bon_prompts=24, k=16, jobs=2, frozen_steps=FROZEN_STEPS)
QUICK = RewardDemoPlan(n_per_env=24, seeds=(0,), policy_steps=8, rm_steps=4, test_per_env=4,
                       bon_prompts=3, k=4, jobs=1, frozen_steps=20)


def prepare_data(out: Path, plan: RewardDemoPlan) -> Path:
    """The benchmark in OUT/data (reused when there with these settings)."""
    folder = out / "data"
    manifest = folder / "manifest.json"
    if manifest.is_file():
        info = json.loads(manifest.read_text(encoding="utf-8"))
        if info.get("seed") == 0 and info["envs"]["plain"]["train"] == plan.n_per_env:
            return folder
    synthesize("preferences", folder, seed=0, n_per_env=plan.n_per_env)
    return folder


def train_policy(out: Path, data: Path, plan: RewardDemoPlan) -> Path:
    """Fine-tune the tiny policy on image descriptions of the training images; its final folder."""
    records = [json.loads(line) for line in (data / "data.jsonl").read_text(encoding="utf-8").splitlines()]
    captions = out / "policy" / "captions.jsonl"
    captions.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"id": r["id"], "image": r["image"], "instruction": r["query"],  # relative to data/
             "target": statement(r["truth"]["kind"], r["truth"]["colour"], r["truth"]["count"]),
             "env": "captions", "split": r["split"]} for r in records if r["split"] == "train"]
    captions.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cfg: RunConfig = validate_config({
        "model": {"name": "tiny:idefics3", "trainable": "full", "tiny": TINY},
        "data": {"path": str(captions), "image_root": str(data)},
        "method": "erm",
        "train": {"steps": plan.policy_steps, "lr": 3e-3, "batch_size": 8, "sampler": "shuffle",
                  "save_every": plan.policy_steps, "keep_checkpoints": 1, "cpu_threads": 1, "log_every": 10},
    }, "reward demo policy")
    final = out / "policy" / "train" / "final"
    if not (final / "config.json").is_file():
        train(cfg, out / "policy" / "train", resume=True, progress=False)
    return final


def matrix_spec(data: Path, policy: Path, plan: RewardDemoPlan | RewardZooPlan) -> dict:
    """The demo's `rm matrix` config."""
    return {
        "base": {
            "model": {"name": str(policy), "trainable": "full"},
            "data": {"path": str(data)},
            "train": {"steps": plan.rm_steps, "lr": 1e-3, "weight_decay": 0.0, "batch_size": 8,
                      "warmup_ratio": 0.1, "save_every": plan.rm_steps, "keep_checkpoints": 1,
                      "cpu_threads": 1, "log_every": 5},
            "eval": {"max_per_env": plan.test_per_env, "n_boot": 500},
        },
        "losses": {"standard": {"loss": "standard"}, "text_only": {"loss": "text_only"},
                   "shortcut_aware": {"loss": "shortcut_aware", "proxy": "copy"}},
        "seeds": list(plan.seeds),
        "jobs": plan.jobs,
    }


def best_of_n(out: Path, data: Path, policy: Path, plan: RewardDemoPlan) -> dict[str, BonResult]:
    """Sample candidates for the plain test prompts, score them with the compared models trained
    on BON_TRAIN_ENV (every seed); per label, the curve (mean over seeds) and the spreads."""
    pairs = [p for p in load_pairs(data, verbose=False).pairs if p.env == BON_TEST_ENV and p.split == "test"]
    sampling = Sampling(k=plan.k, temperature=1.0, top_p=0.95, max_new_tokens=16, seed=0)
    candidates = sample_candidates(pairs[:plan.bon_prompts], out / "bon" / "candidates", sampling=sampling,
                                   policy=ModelRef.folder(policy), data={"path": str(data), "env": BON_TEST_ENV},
                                   resume=True, progress=False)
    curves: dict[str, list] = {}
    for label in COMPARED:
        for seed in plan.seeds:
            model = out / "matrix" / "runs" / label / f"seed-{seed}" / BON_TRAIN_ENV / "train" / "final"
            scores = score_candidates(candidates, out / "bon" / "scores" / label / f"seed-{seed}",
                                      model=ModelRef.folder(model), gold="chrf", resume=True, progress=False)
            curves.setdefault(label, []).append(bon_results({label: scores})[label]["curve"])
    return {
        label: BonResult(
            curve=[{"n": rows[0]["n"], "mean": float(np.mean([r["mean"] for r in rows])),
                    "n_prompts": rows[0]["n_prompts"]} for rows in zip(*per_seed)],
            at_k=seed_spread([rows[-1]["mean"] for rows in per_seed]),
            at_1=seed_spread([rows[0]["mean"] for rows in per_seed]),
        )
        for label, per_seed in curves.items()
    }


def ladder_pairs(data: Path, plan: RewardDemoPlan | RewardZooPlan) -> list[PreferencePair]:
    """The matrix's pairs: every training pair and the first `test_per_env` test pairs of each
    environment (what `rm eval` scores)."""
    kept: list[PreferencePair] = []
    seen: dict[str, int] = {}
    for pair in load_pairs(data, verbose=False).pairs:
        if pair.split == "test":
            if seen.get(pair.env, 0) == plan.test_per_env:
                continue
            seen[pair.env] = seen.get(pair.env, 0) + 1
        kept.append(pair)
    return kept


def cached_states(out: Path, policy: Path, pairs: list[PreferencePair]) -> dict[str, np.ndarray]:
    """`frozen_states` of `pairs` under the policy, cached in OUT/frozen/states.npz (reused when
    it holds these pairs)."""
    path = out / "frozen" / "states.npz"
    ids = np.array([p.id for p in pairs])
    if path.is_file():
        cached = np.load(path)
        if np.array_equal(cached["ids"], ids):
            return {view: cached[view] for view in ("multimodal", "drop")}
    states = frozen_states(ModelRef.folder(policy), pairs)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, ids=ids, **states)  # type: ignore[arg-type]  # numpy's stub reads **states as allow_pickle
    return states


def run_reward_demo(out_dir: str | Path, *, quick: bool = False) -> RewardDemoSummary:
    """Run the demo into `out_dir` (see the module doc)."""
    torch.set_num_threads(1)
    plan = QUICK if quick else FULL
    out = Path(out_dir).absolute()
    t0 = time.perf_counter()
    data = prepare_data(out, plan)
    policy = train_policy(out, data, plan)
    matrix = run_matrix(matrix_spec(data, policy, plan), out / "matrix")
    results = matrix.results
    bon = best_of_n(out, data, policy, plan)
    linear = linear_rung(plan.seeds, n=1000 if quick else 2000, steps=300 if quick else 500)
    pairs = ladder_pairs(data, plan)
    frozen = frozen_rung(pairs, cached_states(out, policy, pairs), plan.seeds, steps=plan.frozen_steps,
                         lr=FROZEN_LR)
    full_proxy = logged_proxy(out / "matrix", "shortcut_aware", list(plan.seeds), results.train_envs)
    summary = RewardDemoSummary(
        quick=quick, seconds=round(time.perf_counter() - t0, 1), plan=plan, matrix=results,
        comparison=compare_losses(results, matrix.runs, *COMPARED), bon=bon, linear=linear, frozen=frozen, full_proxy=full_proxy,
    )
    write_results_json(out, summary.to_dict())
    blocks = [Heading(page_title(TITLE, quick), 1),
              *demo_blocks(results, summary.comparison, bon, out, points=matrix.points, plan=plan,
                           seconds=summary.seconds, bon_setup=(BON_TRAIN_ENV, BON_TEST_ENV), quick=quick),
              *linear_rung_blocks(linear),
              *ladder_blocks(linear, frozen, summary.full,
                             frozen_setup=f"{plan.frozen_steps} steps of 8 pairs, Adam at lr {FROZEN_LR}")]
    md, html = write_page(blocks, out, title=page_title(TITLE, quick))
    print(f"\n{summary.seconds:.0f} s; report: {md.absolute()} and {html.absolute()}")
    return summary

