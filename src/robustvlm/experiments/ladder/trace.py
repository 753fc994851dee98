"""One ladder run traced step by step, for reading how a penalty and its weight moved:

    python -m robustvlm.experiments.ladder.trace FOLDER RUNG METHOD SEED [KEY=VALUE ...]

FOLDER is a `demo ladder` output folder (its results.json's plan and its features/); RUNG one of
its rungs (`vlm:full:zoo:idefics3-siglip-m`); the run is the demo's (`ladder.run_one`, the same
evaluations), with METHOD's planned hyperparameters updated by KEY=VALUE (YAML values, e.g.
`smooth=risks`). Writes FOLDER/traces/RUNG__METHOD__SEED[__KEY=VALUE...].json: {"hparams" (the
updates), "steps": [{"step", and the objective's `LossParts.log_row()`: "loss", "R_emp",
"R_inv", "lambda", "risk/<env>", extras such as "lambda_target"}], "evaluations", "cpu_s"}.
The demo itself keeps the evaluations only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

from robustvlm.errors import ConfigError
from robustvlm.experiments.ladder.plan import LadderPlan
from robustvlm.experiments.ladder.run import FEATURES_DIR, GIVEN, ladder_methods, run_one, run_plan
from robustvlm.experiments.ladder.rung import Rung
from robustvlm.models.outputs import AnswerOutputs
from robustvlm.objectives import LossParts, Objective


class StepTrace(Objective):
    """`objective` as it is, each step's `LossParts.log_row()` (with "step") appended to `rows`."""

    name = "step_trace"
    label = "step trace"

    def __init__(self, objective: Objective, rows: list[dict[str, float]]):  # its hyperparameters are the wrapped one's
        self.inner, self.rows = objective, rows
        self.hp, self.env_names = objective.hp, objective.env_names

    def __call__(self, out: AnswerOutputs, step: int) -> LossParts:
        parts = self.inner(out, step)
        self.rows.append({"step": step, **parts.log_row()})
        return parts

    def resets_optimizer_at(self, step: int) -> bool:
        return self.inner.resets_optimizer_at(step)


def trace_run(folder: Path, rung: Rung, method: str, seed: int, hparams: dict[str, Any]) -> Path:
    """Run and trace one (rung, method, seed) of the ladder output `folder`; the trace's path."""
    results = folder / "results.json"
    if not results.is_file():
        raise ConfigError(f"{results} not found: run `robustvlm demo ladder` into {folder} first")
    plan = LadderPlan.from_dict(json.loads(results.read_text(encoding="utf-8"))["plan"])
    sources = [source for source, r in plan.cells if r == rung]
    if not sources:
        raise ConfigError(f"{results}: no rung {rung.id!r}; its rungs: {[r.id for _, r in plan.cells]}")
    if method not in ladder_methods():
        raise ConfigError(f"unknown ladder method {method!r}: choose from {list(ladder_methods())}")
    rows: list[dict[str, float]] = []
    run = run_one((sources[0], rung, method, seed, GIVEN), run_plan(plan), folder / FEATURES_DIR,
                  hparams=hparams, wrap=lambda objective: StepTrace(objective, rows))
    tag = "__".join([rung.id.replace(":", "_"), method, str(seed), *(f"{k}={v}" for k, v in hparams.items())])
    path = folder / "traces" / f"{tag}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"hparams": hparams, "steps": rows, "evaluations": run["evaluations"],
                                "cpu_s": run["cpu_s"]}), encoding="utf-8")
    return path


def main(argv: list[str]) -> int:
    """The command line of the module doc; exit 2 with a one-line error on bad input."""
    if len(argv) < 4 or not argv[3].isdigit() or any("=" not in kv for kv in argv[4:]):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    hparams = {k: yaml.safe_load(v) for k, v in (kv.split("=", 1) for kv in argv[4:])}
    try:
        print(trace_run(Path(argv[0]), Rung.parse(argv[1]), argv[2], int(argv[3]), hparams))
    except (ConfigError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
