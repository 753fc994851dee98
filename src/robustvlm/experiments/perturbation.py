"""Record a rounding-perturbation re-run of a demo run, and say whether its verdict is established.

    python -m robustvlm.experiments.perturbation RUN RERUN

RUN and RERUN are output folders of `robustvlm demo reward` or `robustvlm demo ladder` with the same
plan, RERUN made on other float kernels (`--kernels avx2`, `analysis.established`): their
results.json machine records must differ in their kernels. The headline intervals of RERUN go into
RUN/results.json under `perturbation` (`Perturbation.to_dict`), the first line of RUN/report.md's
verdict is rewritten by the rule (report.html keeps the line the demo wrote), and the line is
printed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from robustvlm.analysis.established import Interval, Perturbation
from robustvlm.errors import ConfigError, RobustVLMError
from robustvlm.experiments.ladder.paired import paired_from_dict
from robustvlm.experiments.ladder.paired_report import ladder_claims, ladder_established
from robustvlm.experiments.ladder.report import label
from robustvlm.experiments.reward.verdict import reward_claims, reward_established
from robustvlm.machine import MACHINE_KEY

PERTURBATION_KEY = "perturbation"
VERDICT_OPENINGS = ("Established:", "Not established")


def _results(folder: Path) -> dict[str, Any]:
    path = folder / "results.json"
    if not path.is_file():
        raise ConfigError(f"{path} not found: give the output folder of a `robustvlm demo reward` or `demo ladder` run")
    return json.loads(path.read_text(encoding="utf-8"))


def _claims(results: Mapping[str, Any]) -> dict[str, Interval]:
    """The headline claims of a reward demo's (its `comparison`) or a ladder's (its `paired`) results."""
    if "comparison" in results:
        return reward_claims(results["comparison"])
    if "paired" in results:
        return ladder_claims(paired_from_dict(results["paired"]), label)[0]
    raise ConfigError("results.json holds neither a reward demo's comparison nor a ladder's paired tests")


def _verdict_line(results: Mapping[str, Any], perturbation: Perturbation) -> str:
    if "comparison" in results:
        return reward_established(results["comparison"], perturbation)
    return ladder_established(paired_from_dict(results["paired"]), perturbation, label)


def _kernels(machine: Mapping[str, Any] | None, folder: Path) -> str:
    """"avx2 kernels (torch AVX2)": what a run's machine record says ran (ConfigError without one)."""
    if not machine:
        raise ConfigError(f"{folder}/results.json records no machine: re-run it with this version of robustvlm")
    capability = (machine.get("torch") or {}).get("capability")
    return f"{machine.get('kernels', 'native')} kernels" + (f" (torch {capability})" if capability else "")


def perturbation_of(run: Path, rerun: Path) -> tuple[Perturbation, dict[str, Any]]:
    """The perturbation RERUN is of RUN (module doc), and RUN's results; ConfigError when the two
    ran different plans or on the same kernels."""
    first, second = _results(run), _results(rerun)
    if first.get("plan") != second.get("plan"):
        raise ConfigError(f"{run} and {rerun} ran different plans: a perturbation re-run repeats the same command "
                          "with --kernels and another --out")
    ran, reran = _kernels(first.get(MACHINE_KEY), run), _kernels(second.get(MACHINE_KEY), rerun)
    if ran == reran:
        raise ConfigError(f"{run} and {rerun} both ran on {ran}: re-run one with --kernels avx2 (on an AVX-512 CPU)")
    return Perturbation(f"{reran} against {ran}", str(rerun), _claims(second)), first


def record(run: Path, rerun: Path) -> str:
    """Record RERUN in RUN's results.json and report.md (module doc); the verdict's first line."""
    perturbation, results = perturbation_of(run, rerun)
    line = _verdict_line(results, perturbation)
    results[PERTURBATION_KEY] = perturbation.to_dict()
    (run / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    report = run / "report.md"
    if report.is_file():
        lines = report.read_text(encoding="utf-8").splitlines(keepends=True)
        at = next((i for i, text in enumerate(lines) if text.startswith(VERDICT_OPENINGS)), None)
        if at is not None:
            lines[at] = line + "\n"
            report.write_text("".join(lines), encoding="utf-8")
    return line


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        print(record(Path(argv[0]), Path(argv[1])))
    except RobustVLMError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
