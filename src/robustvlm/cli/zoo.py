"""`robustvlm zoo`: build and list the model zoo (small models pretrained offline on real images)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from robustvlm.cli.options import SubParsers

from robustvlm.cli.options import int_at_least


def _zoo_build(args: argparse.Namespace) -> int:
    from robustvlm.workflows.zoo.build import build_members, selected

    names = [n.strip() for n in args.members.split(",") if n.strip()] if args.members else None
    for built in build_members(selected(args.quick, names), jobs=args.jobs):
        state = "already built" if built.reused else "built"
        print(f"zoo:{built.name}\t{state}\taccuracy {built.info['heldout_accuracy']:.3f}\t"
              f"{built.info['cpu_seconds']} CPU s\t{built.folder}")
    return 0


def _zoo_list(args: argparse.Namespace) -> int:
    from robustvlm.workflows.zoo.build import zoo_listing

    print("name\tarch\tset\tkey\tbuilt\taccuracy\tCPU s\tfolder")
    for row in zoo_listing():
        accuracy = "-" if row["heldout_accuracy"] is None else f"{row['heldout_accuracy']:.3f}"
        print(f"zoo:{row['name']}\t{row['arch']}\t{row['set']}\t{row['key']}\t{'yes' if row['built'] else 'no'}\t"
              f"{accuracy}\t{row['cpu_seconds'] if row['built'] else '-'}\t{row['folder']}")
    return 0


def add_zoo(sub: SubParsers) -> None:
    """zoo build, zoo list."""
    zoo = sub.add_parser("zoo", help="small VLMs and dual encoders pretrained offline on real images (zoo:NAME)")
    zoo_sub = zoo.add_subparsers(dest="zoo_command", required=True)
    zb = zoo_sub.add_parser(
        "build", help="pretrain zoo members into $ROBUSTVLM_CACHE/zoo (resumable; a built recipe is reused)"
    )
    zb.add_argument("--quick", action="store_true", help="the small test set of members (seconds each)")
    zb.add_argument("--members", help="comma-separated member names (see zoo list); default: the full zoo")
    zb.add_argument("--jobs", type=int_at_least(1), default=1,
                    help="members built at once, one process of one thread each (default 1; 2 on 2 cores)")
    zb.set_defaults(func=_zoo_build)
    zl = zoo_sub.add_parser("list", help="every recipe: key, whether built, held-out accuracy, CPU seconds")
    zl.set_defaults(func=_zoo_list)
