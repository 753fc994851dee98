"""`robustvlm compare`: two runs on the same questions, compared pair by pair."""

from __future__ import annotations

import argparse
from pathlib import Path

from robustvlm.cli.options import RESUME_HELP, SubParsers, example, float_above, int_at_least
from robustvlm.cli.results_options import add_results_options, read_options


def _compare(args: argparse.Namespace) -> int:
    from robustvlm.workflows.measure.compare import compare_runs, comparison_table, write_comparison

    comparison = compare_runs(args.run_a, args.run_b, metric=args.metric, cluster=args.cluster,
                              power_delta=args.power_delta, n_boot=args.n_boot, fmt=args.format,
                              options=read_options(args))
    print(f"A: {args.run_a}\nB: {args.run_b}\n")
    print(comparison_table(comparison))
    if args.out:
        out = Path(args.out).absolute()
        settings = {"run_a": str(args.run_a), "run_b": str(args.run_b), "metric": comparison.metric, "format": args.format,
                    "cluster": args.cluster, "power_delta": args.power_delta, "n_boot": args.n_boot,
                    **({"run": args.run} if args.run else {}), **({"strict": True} if args.strict else {})}
        json_path, md_path = write_comparison(comparison, out, settings, resume=args.resume)
        print(f"\nwrote {json_path} and {md_path}")
    return 0


def add_compare(sub: SubParsers) -> None:
    """compare."""
    cp = sub.add_parser("compare", help="two eval / icl eval / mc eval runs on the same questions: paired "
                        "difference per environment, paired bootstrap CI, exact McNemar test, clustered "
                        "standard errors, questions needed at 80%% power", epilog=example(
                        "robustvlm compare runs/mc_paired/tiny_siglip/clean.jsonl runs/mc_paired/tiny_clip/clean.jsonl"))
    cp.add_argument("run_a", metavar="RUN_A", help="an eval or icl eval folder, an mc eval question file "
                    "(OUT/MODEL/BENCH.jsonl), or one model's per-question results of lmms-eval (samples) or "
                    "VLMEvalKit (sheets)")
    cp.add_argument("run_b", metavar="RUN_B", help="the same kind of run, on the same questions")
    cp.add_argument("--metric", help="the per-question score to compare (default: correct, or the run's only "
                    "metric)")
    cp.add_argument("--cluster", metavar="FIELD", help="a field of the rows whose equal values are one "
                    "cluster (e.g. id for the rotations of circular questions): clustered SE and bootstrap")
    cp.add_argument("--power-delta", type=float_above(0), default=0.05,
                    help="the difference (score units) the power line sizes for (default 0.05)")
    cp.add_argument("--n-boot", type=int_at_least(100), default=2000, help="bootstrap resamples")
    cp.add_argument("--out", help="also write compare.json and compare.md here")
    add_results_options(cp, counts=False)
    cp.add_argument("--resume", action="store_true", help=RESUME_HELP + " (the comparison is written again)")
    cp.set_defaults(func=_compare)
