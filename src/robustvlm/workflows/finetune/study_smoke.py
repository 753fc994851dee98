"""`robustvlm study CONFIG --smoke`: the same study on a tiny offline model and local data.

A real recipe (a 2B model, hub data, a judge endpoint, DeepSpeed) cannot run on a laptop or in CI.
The smoke run keeps everything that shapes the pipeline (methods and their hyperparameters, the
trainable parts, metrics, carving into per-environment train / test sets) and swaps the rest:

- model: `tiny:idefics3` (same trainable setting and LoRA options);
- data: the built-in `tasks` benchmark (8 in-domain sub-environments, 2 OCR ones held out, like
  the paper's split), 8 records per environment, carved 4 train / 2 test when the recipe carves;
- training: 4 steps, at most 4 examples per batch, warm-ups (`k_skip`, `anneal_steps`) cut to 2
  steps so every penalty is active, bf16 only where a GPU supports it, one CPU thread, no
  launcher (in process);
- evaluation: 2 examples per environment, 8 new tokens, BERTScore with the offline default
  encoder, no judge (CEE is reported absent);
- seeds: the first one.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from robustvlm.objectives import REGISTRY

SMOKE_DATA = {"benchmark": "tasks", "n_per_env": 8}
SMOKE_SPLIT = {"train": 4, "test": 2}
SMOKE_TRAIN = {"steps": 4, "save_every": 2, "grad_accum": 1, "cpu_threads": 1, "bf16": "auto"}
SMOKE_EVAL = {"max_new_tokens": 8, "max_per_env": 2, "batch_size": 8}
WARMUP_KEYS = ("k_skip", "anneal_steps")
SMOKE_WARMUP = 2


def smoke_spec(spec: Mapping) -> dict:
    """The smoke-run stand-in of a study spec (see the module doc); malformed parts are left as
    they are for the study's own validation to report."""
    out = copy.deepcopy(dict(spec))
    out.pop("launcher", None)
    out.pop("launch", None)  # the old name of `launcher`
    base = out.get("base")
    if isinstance(base, dict):
        _shrink_base(base)
    cap_warmups(out.get("methods"))
    seeds = out.get("seeds")
    if isinstance(seeds, list) and seeds:
        out["seeds"] = seeds[:1]
    return out


def cap_warmups(methods: object) -> None:
    """Cut every method entry's warm-ups (`k_skip`, `anneal_steps`, given or default) to
    SMOKE_WARMUP steps, so each penalty is on within a smoke run; malformed entries are left alone."""
    if not isinstance(methods, dict):
        return
    for entry in methods.values():
        if isinstance(entry, dict) and entry.get("method") in REGISTRY:
            hparams = REGISTRY[entry["method"]].hparams
            for key in WARMUP_KEYS:
                if key in hparams and isinstance(entry.get(key, hparams[key].default), int):
                    entry[key] = min(entry.get(key, hparams[key].default), SMOKE_WARMUP)


def shrink_sections(base: dict, smoke_train: Mapping, smoke_eval: Mapping) -> None:
    """In place: `tiny:idefics3` with the base's trainable setting and LoRA options; the base's
    train section without `epochs`, overridden by `smoke_train`; its eval section without a judge
    or BERTScore encoder, overridden by `smoke_eval`."""
    model = base.get("model") or {}
    base["model"] = {k: v for k, v in model.items() if k in ("trainable", "lora")} | {"name": "tiny:idefics3"}
    base["train"] = {k: v for k, v in (base.get("train") or {}).items() if k != "epochs"} | dict(smoke_train)
    evaluation = {k: v for k, v in (base.get("eval") or {}).items() if k not in ("judge", "bertscore")}
    base["eval"] = evaluation | dict(smoke_eval)


def _shrink_base(base: dict) -> None:
    data = base.get("data") or {}
    batch = (base.get("train") or {}).get("batch_size", 4)
    shrink_sections(base, SMOKE_TRAIN, SMOKE_EVAL)
    base["data"] = {**SMOKE_DATA, "seed": data.get("seed", 0)}
    if data.get("split_per_env"):
        base["data"]["split_per_env"] = dict(SMOKE_SPLIT)
    base["train"]["batch_size"] = min(batch, 4) if isinstance(batch, int) else batch
