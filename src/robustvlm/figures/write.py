"""Measured tables of the docs, produced from a demo's results.json, never typed by hand.

A table in a document sits between `<!-- figure:NAME -->` and `<!-- /figure:NAME -->`; `figures.registry.FIGURES`
says which demo's results.json makes it and how (a figure of several runs, in `GRIDS`, reads the
results.json of every subfolder of its folder, in name order; a figure of an `rm matrix` run, in
`MATRIX_FIGURES`, reads that run's matrix.json and sfc.json, `rm-steps` also its runs' per-pair
SFC weights and its data; a figure of a measurement command's
output folder, in `RUN_FILES`, reads the file named there: a .jsonl file as {"records": its rows}). A name may carry a tag after a colon
(`rm-seeds:cue70`, read by `report.figure_name.FigureName`), so that one document holds the same figure of several runs. `icl-served`
reads the icl_predictions.jsonl of its folder's `local` and `served` subfolders: one `icl eval`
run per backend of the same model (`report.icl_served`). `make figures` runs the full demos and rewrites
the Results pages' tables (docs/results/); `docs/quick_figures.md` holds the same tables from the `--quick` variants,
which a test regenerates and compares, so a change that moves a figure shows up at once.

Each table written from results gets a stamp line under it: the commit that measured it and the
hash of the code its results depend on (`report.figure_stamps`, `report.figure_sources`), and a
line naming the machine its results record (`machine.machine_line`: results.json's, or the
`machine` of the measurement command's JSON result, matrix.json's for an `rm matrix` figure;
"not recorded" for results that hold none, a grid's distinct machines joined by ";");
tests/report/test_figure_stamps.py fails when that code has changed since. `--unaffected HOW`
records instead that the code changed and how the figure was checked unaffected; `--measured-at
COMMIT` records the hash now without a re-measurement, saying so.

`--pending` empties a block and marks it not measured yet, for a figure whose runs cannot be made
yet (e.g. its model is still being built); `make figures EXPERIMENT` fills it.

`--images DIR` also draws the figures' pictures (`figures.images`) into DIR.

    python -m robustvlm.figures DOC NAME=RESULTS_DIR [NAME=RESULTS_DIR ...] [--images DIR]
    python -m robustvlm.figures DOC NAME [NAME ...] --unaffected HOW | --measured-at COMMIT | --pending
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path

from robustvlm.analysis.sfc_steps import matrix_sfc_steps
from robustvlm.config import read_yaml_mapping
from robustvlm.errors import ConfigError, RobustVLMError
from robustvlm.figures.images import draw_image
from robustvlm.figures.registry import FIGURES
from robustvlm.machine import MACHINE_KEY, machine_line
from robustvlm.model_ref import ZOO, ModelRef
from robustvlm.models.zoo_recipes import member_dir, recipe
from robustvlm.report.figure_blocks import read_figure, read_stamp, update
from robustvlm.report.figure_name import FigureName
from robustvlm.report.figure_sources import experiment_of, sources_hash
from robustvlm.report.figure_stamps import Stamp, current_commit
from robustvlm.report.icl_served import BACKENDS
from robustvlm.report.tables import markdown_table
from robustvlm.runs import read_jsonl

GRID_FILES = {"invariance-spread": "results.json", "openclip-lines": "groups.json", "openclip-er": "groups.json"}
"""Figures made from several runs: their folder holds one output folder per run, whose file named
here each reads (in folder-name order)."""
GRIDS = tuple(GRID_FILES)
MATRIX_FIGURES = ("rm-seeds", "rm-runs", "rm-steps")
"""Figures of an `rm matrix` output folder: {"matrix": matrix.json, "proxy": sfc.json's
shortcut_aware entry}; `rm-steps` also {"steps": the shortcut-aware runs' SFC weights step by
step (`analysis.sfc_steps.matrix_sfc_steps`) on the data its config.resolved.yaml names}."""
RUN_FILES = {"icl-domains": "icl_results.json", "icl-gain": "icl_predictions.jsonl",
             "icl-shift-cost": "icl_predictions.jsonl", "icl-defined-labels": "defined_labels.json",
             "icl-policy-cost": "icl_predictions.jsonl", "diagnose": "diagnosis.json",
             "zoo-card": "zoo_member.json", "curriculum-stages": "zoo_member.json",
             "curriculum-curve": "zoo_member.json"}
"""Figures of a measurement command's output folder: the file each reads. A zoo member's figures
(`zoo-card`, `curriculum-*`) read its folder's card, and their RESULTS_DIR may be `zoo:NAME`."""
RUN_MACHINE_FILES = {"icl_predictions.jsonl": "icl_results.json"}
"""The JSON result beside a JSONL run file that records the run's machine (`machine.with_machine`)."""


SERVED_FIGURES = ("icl-served",)
"""Figures of a folder holding one `icl eval` run per backend of one model (`local`, `served`):
one tagged block per folder, like `RUN_FILES`' figures."""


def _matrix_results(folder: Path) -> dict:
    paths = [folder / "matrix.json", folder / "sfc.json"]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise ConfigError(f"{', '.join(missing)} not found: run `robustvlm rm matrix` into {folder} first")
    matrix, sfc = (json.loads(p.read_text(encoding="utf-8")) for p in paths)
    machine = {MACHINE_KEY: matrix.pop(MACHINE_KEY)} if MACHINE_KEY in matrix else {}
    return {"matrix": matrix, "proxy": sfc["shortcut_aware"], **machine}


def _matrix_steps(folder: Path) -> dict:
    """`rm-steps`' results: the SFC weights step by step of the matrix in `folder`, on the data
    its config.resolved.yaml names (a relative path from the working directory, as `rm matrix`
    read it)."""
    results = _matrix_results(folder)
    base = read_yaml_mapping(folder / "config.resolved.yaml", "rm matrix settings").get("base", {})
    data = Path(base.get("data", {}).get("path") or "")
    if not (data / "data.jsonl").is_file():
        raise ConfigError(f"{folder}: rm-steps needs the data its runs trained on (a data.jsonl in "
                          f"data.path), not found at {data}")
    matrix = results["matrix"]
    return {**results, "steps": matrix_sfc_steps(folder, data, matrix["seeds"], matrix["train_envs"])}


def _run_file(path: Path, command: str) -> Mapping:
    """A measurement command's output file (`RUN_FILES`): JSON, or JSONL as {"records": rows} with
    the machine its run's JSON result records (`RUN_MACHINE_FILES`), if any."""
    if not path.is_file():
        raise ConfigError(f"{path} not found: run `robustvlm {command}` into {path.parent} first")
    if path.suffix != ".jsonl":
        return json.loads(path.read_text(encoding="utf-8"))
    result = path.parent / RUN_MACHINE_FILES.get(path.name, "")
    recorded = json.loads(result.read_text(encoding="utf-8")) if result.is_file() else {}
    machine = {MACHINE_KEY: recorded[MACHINE_KEY]} if MACHINE_KEY in recorded else {}
    return {"records": read_jsonl(path), **machine}


def results_folder(results_dir: str | Path) -> Path:
    """The folder `results_dir` names: a path, or `zoo:NAME` for that zoo member's folder."""
    ref = ModelRef.parse(str(results_dir))
    if ref.kind != ZOO:
        return Path(results_dir)
    folder = member_dir(recipe(ref.location))
    if not folder.is_dir():
        raise ConfigError(f"{ref.name} is not built ({folder}): run `robustvlm zoo build --members {ref.location}`")
    return folder


def load_results(name: str, results_dir: str | Path) -> Mapping:
    """What figure `name` (a tag after ':' ignored) is made from, read from `results_dir`."""
    kind = FigureName.parse(name).kind
    if kind not in FIGURES:
        raise ConfigError(f"unknown figure {kind!r} (in {name!r}); known: {sorted(FIGURES)}")
    return _results(kind, FIGURES[kind][0], results_folder(results_dir))


def render(name: str, results_dir: str | Path, results: Mapping | None = None) -> str:
    """The markdown table of figure `name` (a tag after ':' ignored) from `results_dir` (or from
    `results`, already read from it)."""
    results = load_results(name, results_dir) if results is None else results
    table = FIGURES[FigureName.parse(name).kind][1](results)
    return markdown_table(table.header, table.rows)


def _results(name: str, demo: str, results_dir: Path) -> Mapping:
    """What figure `name` is made from (module doc): one results.json, a grid's, or an rm matrix's."""
    if name == "rm-steps":
        return _matrix_steps(results_dir)
    if name in MATRIX_FIGURES:
        return _matrix_results(results_dir)
    if name in RUN_FILES:
        return _run_file(results_dir / RUN_FILES[name], demo)
    if name in SERVED_FIGURES:
        return {b: _run_file(results_dir / b / "icl_predictions.jsonl", demo)["records"] for b in BACKENDS}
    if name in GRIDS:
        paths = sorted(results_dir.glob(f"*/{GRID_FILES[name]}"))
        if not paths:
            raise ConfigError(f"no */{GRID_FILES[name]} under {results_dir}: run `robustvlm {demo}` into its "
                              "subfolders first")
        return {path.parent.name: json.loads(path.read_text(encoding="utf-8")) for path in paths}
    path = results_dir / "results.json"
    if not path.is_file():
        raise ConfigError(f"{path} not found: run `robustvlm {demo}` into {results_dir} first")
    return json.loads(path.read_text(encoding="utf-8"))


def results_machine(name: str, results: Mapping) -> str:
    """The one-line machine of the results figure `name` is made from ("" when they record none;
    a grid's distinct machines, in order, joined by "; ")."""
    if FigureName.parse(name).kind in GRIDS:
        found = [machine_line(r[MACHINE_KEY]) for r in results.values() if isinstance(r, Mapping) and MACHINE_KEY in r]
        return "; ".join(dict.fromkeys(found))
    return machine_line(results[MACHINE_KEY]) if MACHINE_KEY in results else ""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m robustvlm.figures", description=__doc__.strip().splitlines()[0],
        epilog="example: python -m robustvlm.figures docs/results/reward.md reward-matrix=demo_reward")
    parser.add_argument("doc", help="the Markdown document holding the figure blocks")
    parser.add_argument("figures", nargs="+", metavar="NAME=RESULTS_DIR | NAME",
                        help="NAME=RESULTS_DIR rewrites a figure from its results and stamps it measured at this "
                             "commit; a bare NAME (with --unaffected, --measured-at or --pending) rewrites its "
                             "stamp only")
    parser.add_argument("--images", metavar="DIR",
                        help="also draw the pictures of the figures that have one (figures.images) into DIR")
    stamp = parser.add_mutually_exclusive_group()
    stamp.add_argument("--unaffected", metavar="HOW",
                       help="record that the figures' code changed and HOW a check showed them unaffected")
    stamp.add_argument("--measured-at", metavar="COMMIT",
                       help="record the code hash now, marked not re-verified since COMMIT, which measured them")
    stamp.add_argument("--pending", action="store_true",
                       help="empty the figures' blocks and mark them not measured yet (their runs cannot be made "
                            "yet), naming the `make figures` experiment that writes them")
    return parser


def _stamp(text: str, name: str, args: argparse.Namespace) -> Stamp:
    """The new stamp of figure `name` without a re-measurement (`--unaffected` / `--measured-at`)."""
    at, code, old = current_commit(), sources_hash(name), read_stamp(text, name)
    if old is not None and old.kind == "pending":
        raise ConfigError(f"figure {name} is not measured yet: run `make figures {old.how}`")
    machine = old.machine if old is not None else ""
    if args.measured_at:
        return Stamp("not-reverified", args.measured_at, code, at=at, machine=machine)
    if old is None:
        raise ConfigError(f"figure {name} has no stamp saying which commit measured it: use --measured-at")
    return Stamp("checked", old.commit, code, at=at, how=args.unaffected, machine=machine)


def _rewrite(doc: Path, pair: str, args: argparse.Namespace) -> str:
    """Rewrite one figure of `doc` (`NAME=RESULTS_DIR` or a bare NAME, see `_parser`); what was done."""
    if "=" in pair:
        name, results_dir = pair.split("=", 1)
        results = load_results(name, results_dir)
        stamp = Stamp("measured", current_commit(), sources_hash(name), machine=results_machine(name, results))
        update(doc, name, render(name, results_dir, results), stamp)
        image = draw_image(name, results, Path(args.images)) if args.images else None
        return f"figure {name} from {results_dir}" + (f", picture {image}" if image else "")
    if args.pending:
        update(doc, pair, "", Stamp("pending", how=experiment_of(pair)))
        return f"figure {pair}: marked not measured yet"
    if not (args.unaffected or args.measured_at):
        raise ConfigError(f"{pair}: give NAME=RESULTS_DIR, or a bare NAME with --unaffected, --measured-at or "
                          "--pending")
    text = doc.read_text(encoding="utf-8")
    update(doc, pair, read_figure(text, pair), _stamp(text, pair, args))
    return f"figure {pair}: stamp rewritten"


def main(argv: list[str]) -> int:
    """Rewrite the named figures of DOC from their results, or their stamps only (`_parser`)."""
    args = _parser().parse_args(argv)
    for pair in args.figures:
        try:
            done = _rewrite(Path(args.doc), pair, args)
        except (RobustVLMError, OSError) as err:
            print(f"error: {args.doc}: {err}", file=sys.stderr)
            return 2
        print(f"{args.doc}: {done}")
    return 0

