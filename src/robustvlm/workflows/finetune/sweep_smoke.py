"""`robustvlm sweep CONFIG --smoke`: the same sweep on a tiny offline model and built-in data.

A real sweep (hundreds of steps per run, dozens of runs, a launcher across GPUs) is too big to
check a config with. The smoke run keeps what shapes the pipeline (methods, their fixed
hyperparameters, the search ranges, the trainable parts, the metric and model selection) and
swaps the rest (see `smoke_spec`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from robustvlm.workflows.finetune.study_smoke import cap_warmups, shrink_sections

SMOKE_TRAIN = {"steps": 4, "cpu_threads": 1, "bf16": "auto", "grad_accum": 1}
SMOKE_EVAL = {"max_new_tokens": 8, "max_per_env": 4, "batch_size": 8}


def smoke_spec(spec: Mapping) -> dict:
    """The smoke-run stand-in of a sweep: a tiny offline model, a built-in benchmark at 8 records per
    environment (the configured one, else `spurious`), 4 steps with a checkpoint every 2, warm-ups
    (`k_skip`, `anneal_steps`) cut to 2 steps, at most 2 draws, the first seed, 4 evaluated
    records per environment, in this process."""
    out = copy.deepcopy(dict(spec))
    out["launcher"] = {"kind": "local"}
    base = out.get("base")
    if isinstance(base, dict):
        data = base.get("data") or {}
        if data.get("benchmark") is None:
            out.pop("test_envs", None)
            out.pop("headline_env", None)
        shrink_sections(base, SMOKE_TRAIN, SMOKE_EVAL)
        base["data"] = {
            "benchmark": data.get("benchmark") or "spurious",
            "n_per_env": 8,
            "seed": data.get("seed", 0),
        }
    out["checkpoint_every"] = 2
    if isinstance(out.get("n_draws"), int):
        out["n_draws"] = min(out["n_draws"], 2)
    if isinstance(out.get("seeds"), list) and out["seeds"]:
        out["seeds"] = out["seeds"][:1]
    cap_warmups(out.get("methods"))  # every penalty on within the 4 steps
    return out
