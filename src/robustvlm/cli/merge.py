"""`robustvlm merge`: the run folders of `--shard I/N` runs joined into the results of one run;
and the `--shard I/N` option of the scoring commands that write them."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from robustvlm.cli.options import SubParsers, example
from robustvlm.errors import ConfigError
from robustvlm.sharding import Shard

SHARD_HELP = (
    "score only shard I of N (0 <= I < N): the I-th of N contiguous blocks of the questions, into its own --out "
    "(one machine each, no launcher); `robustvlm merge` joins the N folders into the results of one run"
)


def add_shard_option(parser: argparse.ArgumentParser) -> None:
    """--shard I/N of a scoring command (`sharding.Shard`)."""

    def shard(text: str) -> Shard:
        try:
            return Shard.parse(text)
        except ConfigError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    parser.add_argument("--shard", metavar="I/N", type=shard, help=SHARD_HELP)


def _merge(args: argparse.Namespace) -> int:
    from robustvlm.cli import main
    from robustvlm.sharding import merging
    from robustvlm.workflows.merge import merge_shards

    out = Path(args.out).absolute()
    plan = merge_shards(args.folders, out)
    with merging(), contextlib.chdir(plan.cwd):
        status = main(plan.argv)
    if status == 0:
        print(f"merged {len(args.folders)} shards into {out}")
    return status


def add_merge(sub: SubParsers) -> None:
    """merge."""
    mg = sub.add_parser(
        "merge", help="join the folders of an eval / mc eval / icl eval / diagnose / rm eval / embed eval run split with "
        "--shard I/N",
        epilog=example("robustvlm merge runs/mc_shard0 runs/mc_shard1 --out runs/mc_merged"),
        description="Checks that the folders are the finished shards 0..N-1 of one run (same command, settings "
        "and questions; no overlap, no gap), writes their per-question rows in question order into --out, then "
        "runs the command again there with --resume, which scores nothing and writes the summaries from the "
        "merged rows.")
    mg.add_argument("folders", nargs="+", metavar="RUN_FOLDER", help="the shards' run folders (--out of each)")
    mg.add_argument("--out", required=True, help="a new folder for the merged run")
    mg.set_defaults(func=_merge)
