"""`robustvlm zoo`: build and list the model zoo (small models pretrained offline on real images), and
probe whether a member learns to read a label from its context (`zoo probe-context`) or to copy
in text-only associative recall (`zoo probe-recall`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from robustvlm.cli.options import SubParsers

from robustvlm.cli.options import RESUME_HELP, add_data_root, example, float_above, int_at_least
from robustvlm.model_ref import ModelRef


def _zoo_build(args: argparse.Namespace) -> int:
    from robustvlm.errors import ConfigError
    from robustvlm.model_ref import ModelRef
    from robustvlm.workflows.zoo.build import build_members, selected

    names = None if args.members is None else [n.strip() for n in args.members.split(",") if n.strip()]
    if names == []:
        raise ConfigError(f"--members {args.members!r}: no member named; give comma-separated names (zoo list), "
                          "or leave the option out for the whole zoo")
    for built in build_members(selected(args.quick, names), jobs=args.jobs):
        state = "already built" if built.reused else "built"
        print(f"{ModelRef.zoo(built.name).name}\t{state}\taccuracy {built.info['heldout_accuracy']:.3f}\t"
              f"{built.info['cpu_seconds']} CPU s\t{built.folder}")
    return 0


def _zoo_list(args: argparse.Namespace) -> int:
    from robustvlm.model_ref import ModelRef
    from robustvlm.workflows.zoo.listing import zoo_listing

    print("name\tarch\tset\tkey\tbuilt\taccuracy\tCPU s\tfolder")
    for row in zoo_listing():
        accuracy = "-" if row["heldout_accuracy"] is None else f"{row['heldout_accuracy']:.3f}"
        print(f"{ModelRef.zoo(row['name']).name}\t{row['arch']}\t{row['set']}\t{row['key']}\t"
              f"{_built(row['built'])}\t{accuracy}\t{row['cpu_seconds'] if row['built'] is True else '-'}\t{row['folder']}")
    return 0


def _built(state: bool | str) -> str:
    return state if isinstance(state, str) else "yes" if state else "no"


def _checked_probe_folder(args: argparse.Namespace, command: str, keys: tuple[str, ...]) -> Path:
    """The claimed output folder of a probe (`runs.claim_run_folder`, before any work), after
    refusing a member and a fresh depth together or neither, and a window longer than the run."""
    from robustvlm.errors import ConfigError
    from robustvlm.runs import claim_run_folder

    if (args.init is None) == (args.fresh_depth is None):
        raise ConfigError(f"{command}: name a built member (--init zoo:NAME) or a fresh decoder depth "
                          "(--fresh-depth N), one of the two")
    if args.every > args.steps:
        raise ConfigError(f"--every {args.every} is longer than the run (--steps {args.steps}): the curve would "
                          "hold no window; choose --every <= --steps")
    settings = {k: getattr(args, k) for k in keys}
    return claim_run_folder(args.out, settings, command=command, resume=args.resume)


def _write_probe(report: dict, out: Path) -> Path:
    """`out/probe.json`, written atomically."""
    import json

    tmp = out / "probe.json.tmp"
    tmp.write_text(json.dumps(report, indent=2), encoding="utf-8")
    tmp.replace(out / "probe.json")
    return (out / "probe.json").resolve()


def _zoo_probe_context(args: argparse.Namespace) -> int:
    import torch

    from robustvlm.workflows.zoo.context_probe import probe

    out = _checked_probe_folder(args, "zoo probe-context", ("init", "fresh_depth", "named", "queries", "steps",
                                                            "every", "lr", "batch_size", "n_images"))
    torch.set_num_threads(1)
    report = probe(ModelRef.parse(args.init) if args.init else None, named=args.named, queries=args.queries, steps=args.steps, lr=args.lr,
                   batch_size=args.batch_size, fresh_depth=args.fresh_depth, n_images=args.n_images,
                   every=args.every)
    print(f"probe: {_write_probe(report, out)}")
    return 0


def _zoo_probe_recall(args: argparse.Namespace) -> int:
    import torch

    from robustvlm.workflows.zoo.context_probe import probe_recall

    out = _checked_probe_folder(args, "zoo probe-recall", ("init", "fresh_depth", "width", "steps", "every", "lr",
                                                           "batch_size", "save_model"))
    torch.set_num_threads(1)
    report = probe_recall(ModelRef.parse(args.init) if args.init else None, steps=args.steps, lr=args.lr, batch_size=args.batch_size,
                          fresh_depth=args.fresh_depth, width=args.width, every=args.every,
                          save=out / "model" if args.save_model else None)
    print(f"probe: {_write_probe(report, out)}; copying emerged at step {report['emergence_step']}")
    return 0


def _add_probe_recall(zoo_sub: argparse._SubParsersAction) -> None:
    """`zoo probe-recall`'s options."""
    zp = zoo_sub.add_parser(
        "probe-recall", help="train a zoo VLM's decoder (or a fresh one) on text-only associative recall, the "
        "in-context curriculum's first stage; logs its loss against the set-only level and the step where "
        "copying emerges; writes OUT/probe.json", epilog=example(
            "robustvlm zoo probe-recall --fresh-depth 2 --steps 4000 --every 100 --out out/recall_fresh2"))
    zp.add_argument("--init", metavar="MODEL", help="zoo:NAME of a built VLM member, or its folder")
    zp.add_argument("--fresh-depth", type=int_at_least(1), metavar="N",
                    help="probe a fresh LLaVA of N decoder layers instead of a member")
    zp.add_argument("--width", type=int_at_least(16), default=64, help="the fresh decoder's width (default 64)")
    zp.add_argument("--steps", type=int_at_least(1), default=4000, help="training steps (default 4000)")
    zp.add_argument("--every", type=int_at_least(1), default=100, help="steps per logged window (default 100)")
    zp.add_argument("--lr", type=float_above(0.0), default=2e-3, help="peak learning rate (default 2e-3)")
    zp.add_argument("--batch-size", type=int_at_least(1), default=32, help="sequences per step (default 32)")
    zp.add_argument("--save-model", action="store_true",
                    help="also save the trained model to OUT/model (e.g. for zoo probe-context --init OUT/model)")
    zp.add_argument("--out", required=True, help="folder for probe.json")
    zp.add_argument("--resume", action="store_true", help=RESUME_HELP + " (the probe runs again)")
    zp.set_defaults(func=_zoo_probe_recall)


def _add_probe_context(zoo_sub: argparse._SubParsersAction) -> None:
    """`zoo probe-context`'s options."""
    zp = zoo_sub.add_parser(
        "probe-context", help="tune a zoo VLM on defined-label episodes only and log its first-token loss "
        "against chance (does it learn to read a label from its context?); writes OUT/probe.json", epilog=example(
            "robustvlm zoo probe-context --fresh-depth 4 --named --queries 6 --steps 600 --out out/probe_fresh4_named"))
    zp.add_argument("--init", metavar="MODEL", help="zoo:NAME of a built VLM member, or its folder")
    zp.add_argument("--fresh-depth", type=int_at_least(1), metavar="N",
                    help="probe a fresh 64-wide LLaVA of N decoder layers instead of a member")
    zp.add_argument("--named", action="store_true", help="class names in words instead of pictures")
    zp.add_argument("--queries", type=int_at_least(1), default=4, help="labelled queries per episode (default 4)")
    zp.add_argument("--steps", type=int_at_least(1), default=600, help="tuning steps (default 600)")
    zp.add_argument("--every", type=int_at_least(1), default=50, help="steps per logged window (default 50)")
    zp.add_argument("--lr", type=float_above(0.0), default=2e-3, help="peak learning rate (default 2e-3)")
    zp.add_argument("--batch-size", type=int_at_least(1), default=16, help="episodes per step (default 16)")
    zp.add_argument("--n-images", type=int_at_least(10), metavar="N",
                    help="draw the episodes' pictures from N training scans (default all 60,000)")
    zp.add_argument("--out", required=True, help="folder for probe.json")
    zp.add_argument("--resume", action="store_true", help=RESUME_HELP + " (the probe runs again)")
    zp.set_defaults(func=_zoo_probe_context)


def add_zoo(sub: SubParsers) -> None:
    """zoo build, zoo list, zoo probe-context, zoo probe-recall."""
    zoo = sub.add_parser("zoo", help="small VLMs and dual encoders pretrained offline on real images (zoo:NAME)",
                         epilog=example("robustvlm zoo list", "robustvlm zoo build --quick"))
    zoo_sub = zoo.add_subparsers(required=True)
    zb = zoo_sub.add_parser(
        "build", help="pretrain zoo members into $ROBUSTVLM_CACHE/zoo (resumable; a built recipe is reused)",
        epilog=example("robustvlm zoo build --quick"),
    )
    zb.add_argument("--quick", action="store_true", help="the small test set of members (tiny, for the tests and the quick demos)")
    zb.add_argument("--members", help="comma-separated member names (see zoo list); default: the full zoo")
    zb.add_argument("--jobs", type=int_at_least(1), default=1,
                    help="members built at once, one process of one thread each (default 1; 2 on 2 cores)")
    add_data_root(zb)
    zb.set_defaults(func=_zoo_build)
    zl = zoo_sub.add_parser("list", help="every recipe: key, whether built, held-out accuracy, CPU seconds",
                            epilog=example("robustvlm zoo list"))
    zl.set_defaults(func=_zoo_list)
    _add_probe_context(zoo_sub)
    _add_probe_recall(zoo_sub)
