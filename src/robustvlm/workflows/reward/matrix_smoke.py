"""`robustvlm rm matrix CONFIG --smoke`: a real matrix recipe on a tiny model and built-in data.

The paper's recipe (an 8B backbone, three hub datasets, a global batch of 256) cannot run on a
laptop or in CI. The smoke run keeps what shapes the pipeline (the losses and their arguments, the
trainable parts and LoRA options, the optimiser settings, max length, evaluation settings) and
swaps the rest:

- model: `tiny:idefics3` (same `trainable` and `lora`); a warm start (`init_from`, another run's
  output) is dropped;
- data: the built-in `preferences` benchmark, or the recipe's own variant of it (e.g.
  `preferences-salient`), 12 training pairs per environment, whose environments replace the
  recipe's datasets, so `per_env` (which names those datasets) is
  dropped and the runs train on two of them (SMOKE_TRAIN_ENVS), tested on all four;
- training: 3 steps, at most 4 pairs per batch, no accumulation, one CPU thread, bf16 only where
  a GPU supports it;
- evaluation: 4 test pairs per environment; seeds: the first one; one job.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

SMOKE_DATA = {"benchmark": "preferences", "n_per_env": 12}
SMOKE_TRAIN = {"steps": 3, "save_every": 3, "grad_accum": 1, "cpu_threads": 1, "bf16": "auto"}
SMOKE_EVAL = {"max_per_env": 4}
SMOKE_TRAIN_ENVS = ["clause", "long"]


def smoke_matrix_spec(spec: Mapping) -> dict:
    """The smoke-run stand-in of a matrix spec (see the module doc); malformed parts are left as
    they are for the matrix's own validation to report."""
    out = copy.deepcopy(dict(spec))
    out.pop("per_env", None)
    out["train_envs"] = list(SMOKE_TRAIN_ENVS)
    out["jobs"] = 1
    seeds = out.get("seeds")
    if isinstance(seeds, list) and seeds:
        out["seeds"] = seeds[:1]
    base = out.get("base")
    if isinstance(base, dict):
        base.pop("init_from", None)
        model = base.get("model") or {}
        base["model"] = {k: v for k, v in model.items() if k in ("trainable", "lora")} | {"name": "tiny:idefics3"}
        data = base.get("data") or {}
        variant = data.get("benchmark")
        kept = {"benchmark": variant} if isinstance(variant, str) and variant.startswith("preferences") else {}
        base["data"] = {**SMOKE_DATA, **kept, "seed": data.get("seed", 0)} | (
            {"max_length": data["max_length"]} if "max_length" in data else {})
        train = {k: v for k, v in (base.get("train") or {}).items() if k != "epochs"}
        batch = train.get("batch_size", 4)
        base["train"] = train | SMOKE_TRAIN | {"batch_size": min(batch, 4) if isinstance(batch, int) else batch}
        base["eval"] = (base.get("eval") or {}) | SMOKE_EVAL
    return out
