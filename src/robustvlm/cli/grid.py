"""`robustvlm grid`: models x benchmarks x shards of `mc eval` or `eval` from one YAML, through a
launcher, merged per (model, benchmark) (`workflows.eval_grid`)."""

from __future__ import annotations

import argparse
import contextlib
import io
from pathlib import Path
from typing import TYPE_CHECKING

from robustvlm.cli.options import SubParsers, config_file, example
from robustvlm.errors import ConfigError

if TYPE_CHECKING:
    from robustvlm.workflows.eval_grid import GridPlan


def check_cell_options(plan: GridPlan) -> None:
    """ConfigError, naming the config and what the command refused, unless the first cell's
    command line parses (the `options:` of the config are the command's), before any cell runs."""
    from robustvlm.cli import build_parser

    refused = io.StringIO()
    try:
        with contextlib.redirect_stderr(refused):
            build_parser().parse_args(list(plan.cells[0].argv))
    except SystemExit:
        lines = refused.getvalue().strip().splitlines()
        raise ConfigError(f"{plan.source}: options: `robustvlm {plan.config.command}` refuses the cells' command "
                          f"line: {lines[-1] if lines else 'no reason given'}") from None


def _grid(args: argparse.Namespace) -> int:
    from robustvlm.workflows.eval_grid import grid_plan, grid_plan_lines, run_grid

    out = Path(args.out or Path("grids") / Path(args.config).stem)
    plan = grid_plan(args.config, out, launcher=args.launcher)
    check_cell_options(plan)
    if args.dry_run:
        print("\n".join(grid_plan_lines(plan)))
        return 0
    run_grid(args.config, out, launcher=args.launcher)
    print(f"merged results: {plan.out / 'grid.json'} names the folder of every model x benchmark")
    return 0


def add_grid(sub: SubParsers) -> None:
    """grid."""
    gr = sub.add_parser(
        "grid", help="models x benchmarks x shards of mc eval or eval from one YAML, through a launcher, "
        "merged per model and benchmark (resumable)",
        epilog=example("robustvlm grid configs/eval_grid.yaml --dry-run"),
        description="Runs every (model, benchmark, shard) as `--shard I/N` into its own folder with the config's "
        "launcher (local workers, a multi-gpu pool, slurm arrays), then `robustvlm merge` joins the shards of each "
        "model and benchmark. Finished cells and merges are skipped when the command runs again.")
    gr.add_argument("config", type=config_file, help="grid YAML: command, models, benchmarks, shards, options, launcher")
    gr.add_argument("--out", help="grid directory (default grids/<config name>)")
    gr.add_argument("--launcher", choices=["local", "multi-gpu", "slurm"],
                    help="overrides the config's launcher.kind")
    gr.add_argument("--dry-run", action="store_true",
                    help="print the plan (cells, merges, their command lines, what is done) and run nothing")
    gr.set_defaults(func=_grid)
