"""`robustvlm data`: check datasets, synthesise the built-in benchmarks, and corrupt any image folder
with ImageNet-C's corruptions (`data corrupt`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from robustvlm.cli.options import (
    IMAGE_ROOT_HELP,
    OUTSIDE_ROOT_HELP,
    OVERWRITE_HELP,
    SubParsers,
    add_data_root,
    example,
    int_at_least,
)
from robustvlm.cli.output_checks import output_folder
from robustvlm.errors import ConfigError, MissingDataSource
from robustvlm.extras import require


def _data_check(args: argparse.Namespace) -> int:
    from robustvlm.data.check import check_dataset
    from robustvlm.redact import redact

    report = check_dataset(
        args.path,
        fmt=args.format,
        env_column=args.env_column,
        env_map=args.env_map,
        task_rules=args.task_rules,
        image_root=args.image_root,
        allow_outside_root=args.allow_outside_root,
    )
    print(redact(report.format()))  # a key-like path or value is masked in every message
    return 0 if report.ok else 1


def _data_synth(args: argparse.Namespace) -> int:
    from robustvlm.data.synth import benchmark_in, synthesize
    from robustvlm.runs import mark_output_folder, unmark_unused_folder

    if args.benchmark == "mnist":
        require("data", "data synth --benchmark mnist (real MNIST digits)")

    previous = benchmark_in(Path(args.out))
    if previous is not None and not args.overwrite:
        raise ConfigError(
            f"--out {args.out} already holds the built-in benchmark {previous!r}: pass --overwrite "
            "to replace it, or choose another --out"
        )
    out = Path(args.out)
    try:
        manifest = synthesize(args.benchmark, mark_output_folder(out, "data synth"), seed=args.seed,
                              n_per_env=args.n_per_env)
    except BaseException:
        unmark_unused_folder(out)  # a failed build (it removes its own files) leaves no marker either
        raise
    print(f"wrote {args.benchmark} to {Path(args.out).resolve()} (manifest: {Path(manifest).resolve()})")
    return 0


def copy_in_use(skipped: Path) -> str:
    """What the commands read without the download: the Fashion-MNIST copy found in another
    folder than `skipped` (where it came from, its checksums' verdict), or that none was found."""
    from robustvlm.data.provenance import fashion_copy
    from robustvlm.data.real_images import fashion_root

    try:
        root = fashion_root()
    except MissingDataSource:
        return "no other copy was found either (see `robustvlm data fetch --help` for a local mirror)"
    if root.resolve() == skipped:
        return f"the copy already in {root} is the one the commands read"
    record = fashion_copy(root)
    kind = "Zalando's published data" if record["published_data"] else "NOT Zalando's published data"
    return f"the commands read the copy already in {root} instead (from {record['source']}; {kind})"


def _data_fetch(args: argparse.Namespace) -> int:
    from robustvlm.data.fetch import FASHION_URL, checked_mirror_url, fetch_fashion_mnist
    from robustvlm.data.real_images import FASHION_ENV, fetched_fashion_root
    from robustvlm.runs import mark_output_folder

    url = checked_mirror_url(args.url or FASHION_URL)  # before the folder: a refused URL leaves nothing
    if args.to is not None:  # a folder the user chose: robustvlm's own, or new (runs.check_output_folder)
        mark_output_folder(Path(args.to), "data fetch")
    folder = (Path(args.to) if args.to is not None else fetched_fashion_root()).expanduser().resolve()
    try:
        fetched = fetch_fashion_mnist(folder, url)
    except MissingDataSource as err:  # offline: say which copy the commands read instead, if any
        raise MissingDataSource(f"{err}; {copy_in_use(folder)}") from None
    for name, downloaded in fetched:
        print(f"{name}\t{'downloaded, checksum ok' if downloaded else 'already there, checksum ok'}")
    print(f"Fashion-MNIST in {folder}" + ("" if args.to is None else f" (use --data-root {folder} or {FASHION_ENV}={folder})"))
    return 0


def _data_corrupt(args: argparse.Namespace) -> int:
    from robustvlm.data.corrupted_suite import write_corrupted_suite
    from robustvlm.data.corruptions import COMMON, SEVERITIES, VALIDATION

    require("corruptions", "data corrupt (ImageNet-C corruptions)")
    named = {"common": COMMON, "all": (*COMMON, *VALIDATION)}
    corruptions = named.get(args.corruptions) or tuple(c.strip() for c in args.corruptions.split(","))
    known = (*COMMON, *VALIDATION)
    unknown = sorted(set(corruptions) - set(known))
    if unknown or len(set(corruptions)) < len(corruptions):
        why = ("an empty name (a stray comma)" if "" in unknown else f"unknown {', '.join(unknown)}" if unknown
               else "a corruption named twice")
        raise ConfigError(f"--corruptions {args.corruptions!r}: {why}; give common, all or a comma-separated list "
                          f"of distinct names of {', '.join(known)}")
    try:
        severities = tuple(int(s) for s in args.severities.split(","))
    except ValueError:
        severities = ()
    if not set(severities) <= set(SEVERITIES) or len(set(severities)) < len(severities) or not severities:
        raise ConfigError(f"--severities: distinct comma-separated severities of 1-5, got {args.severities!r}")
    manifest = write_corrupted_suite(Path(args.source), Path(args.out), corruptions=corruptions,
                                     severities=severities, seed=args.seed, skip_bad=args.skip_bad)
    skipped = json.loads(manifest.read_text(encoding="utf-8"))["skipped"]
    print(f"wrote {len(corruptions) * len(severities) + 1} domains to {Path(args.out).resolve()} "
          f"(manifest: {manifest.resolve()})" + (f"; {skipped} bad pictures skipped, listed in "
                                                 f"{Path(args.out) / 'skipped.jsonl'}" if skipped else ""))
    return 0


def _add_corrupt(data_sub: argparse._SubParsersAction) -> None:
    """`data corrupt`'s options."""
    corrupt = data_sub.add_parser(
        "corrupt", help="write ImageNet-C corruptions at five severities of any image folder SOURCE/CLASS/*.png "
        "as a domain suite OUT/<corruption>-<severity>/CLASS/*.png (with OUT/clean); needs the [corruptions] extra",
        epilog=example("robustvlm data corrupt data/domains/digits/clean --out data/digits-corrupted"))
    corrupt.add_argument("source", help="image folder SOURCE/CLASS/*.png|jpg (e.g. a suite's clean domain)")
    corrupt.add_argument("--out", required=True, type=output_folder,
                         help="folder for the suite; the same command run again resumes a killed run, keeping finished "
                         "domains and classes (other settings are refused)")
    corrupt.add_argument("--corruptions", default="common",
                         help="common (ImageNet-C's 15, default), all (with its 4 validation ones), or a "
                         "comma-separated list such as gaussian_noise,fog")
    corrupt.add_argument("--severities", default="1,2,3,4,5", help="comma-separated severities 1-5 (default all)")
    corrupt.add_argument("--seed", type=int_at_least(0), default=0, help="seeds every picture's draws (default 0)")
    corrupt.add_argument("--skip-bad", action="store_true",
                         help="leave out pictures that cannot be read, or are under 32 px or over 4096x4096 px "
                         "(listed in OUT/skipped.jsonl, counted) instead of stopping at the first")
    corrupt.set_defaults(func=_data_corrupt)


def add_data(sub: SubParsers) -> None:
    """data check, data synth, data fetch, data corrupt."""
    from robustvlm.data.loaders import format_choices

    data = sub.add_parser("data", help="check datasets and synthesise the built-in benchmarks",
                          epilog=example("robustvlm data synth --benchmark tasks --out data/tasks",
                                         "robustvlm data check data/tasks"))
    data_sub = data.add_subparsers(required=True)
    check = data_sub.add_parser(
        "check", help="validate a dataset; list every bad record (exit 1 if any)",
        epilog=example("robustvlm data check data/tasks"),
    )
    check.add_argument("path", help="a record file (JSONL, LLaVA JSON, parquet), an image folder or a built-in "
                       "benchmark's folder")
    check.add_argument("--format", default="auto", help=format_choices())
    check.add_argument("--env-map", help="YAML mapping source names to environments")
    check.add_argument("--env-column", help="record field that holds the environment")
    check.add_argument(
        "--task-rules", action="store_true", help="assign task types from the instruction"
    )
    check.add_argument("--image-root", metavar="DIR", help=IMAGE_ROOT_HELP)
    check.add_argument("--allow-outside-root", action="store_true", help=OUTSIDE_ROOT_HELP)
    check.set_defaults(func=_data_check)
    synth = data_sub.add_parser("synth", help="write a built-in synthetic benchmark",
                                epilog=example("robustvlm data synth --benchmark tasks --out data/tasks"))
    synth.add_argument(
        "--benchmark", required=True,
        help="tasks | spurious | digits | domains | preferences | mnist | fashion | fashion-test | fashion-test-graded | "
        "fashion-spurious",
    )
    synth.add_argument("--out", required=True, type=output_folder,
                       help="folder to write the records, images and manifest.json to")
    synth.add_argument("--seed", type=int_at_least(0), default=0, help="random seed of the benchmark (0)")
    synth.add_argument("--n-per-env", type=int_at_least(1), default=None,
                       help="records per environment (default: the benchmark's own size)")
    synth.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP % "benchmark")
    add_data_root(synth)
    synth.set_defaults(func=_data_synth)
    fetch = data_sub.add_parser(
        "fetch", help="download a real-image dataset and check it by checksum (fashion-mnist: 30 MB)",
        epilog=example("robustvlm data fetch fashion-mnist --to data/fashion-mnist"))
    fetch.add_argument("dataset", choices=["fashion-mnist"], help="the dataset to download")
    fetch.add_argument("--to", type=output_folder, metavar="DIR",
                       help="folder to write (default $ROBUSTVLM_CACHE/datasets/fashion-mnist, read by default)")
    fetch.add_argument("--url", metavar="URL", help="base URL of a mirror (http(s):// or file://; default Zalando's)")
    fetch.set_defaults(func=_data_fetch)
    _add_corrupt(data_sub)
