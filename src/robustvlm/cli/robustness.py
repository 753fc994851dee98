"""`robustvlm robustness`: accuracy-on-the-line fits, effective robustness, the task-signal study."""

from __future__ import annotations

import argparse
from pathlib import Path

from robustvlm.cli.options import RESUME_HELP, SubParsers, config_file, example, int_at_least


def _robustness_fit(args: argparse.Namespace) -> int:
    from robustvlm.workflows.measure.robustness_fit import fit_from_results

    line = fit_from_results(
        args.results,
        ref=args.ref,
        shift=args.shift,
        baseline=args.baseline,
        transform=args.transform,
        out_dir=args.out,
        resume=args.resume,
    ).fit
    print(
        f"{args.transform} line: slope {line.slope:.3f}, intercept {line.intercept:.3f}, "
        f"r2 {line.r2:.3f} over {line.n} models; wrote {args.out}/fit.json, scatter.png"
    )
    return 0


def _robustness_simulate(args: argparse.Namespace) -> int:
    from robustvlm.workflows.measure.robustness_fit import simulate_to_dir

    result = simulate_to_dir(args.out, seed=args.seed, resume=args.resume)
    print(
        f"fitted slope {result['fit_test']['slope']:.3f}, predicted {result['predicted']['slope']:.3f}; "
        f"wrote {args.out}"
    )
    return 0


def _robustness_task_signal(args: argparse.Namespace) -> int:
    from robustvlm.workflows.measure.task_signal import load_task_signal_config, run_task_signal

    config, overrides = args.config, list(args.overrides)
    if config is not None and "=" in config and not Path(config).is_file():  # an override, no config file
        config, overrides = None, [config, *overrides]
    cfg = load_task_signal_config(config, quick=args.quick, overrides=overrides)
    out = args.out or ("task_signal_quick" if args.quick else "task_signal")
    run_task_signal(cfg, out, resume=args.resume, label="quick" if args.quick else "")
    return 0


def add_robustness(sub: SubParsers) -> None:
    """robustness fit, robustness simulate, robustness task-signal."""
    rb = sub.add_parser("robustness", help="accuracy-on-the-line fits and effective robustness")
    rb_sub = rb.add_subparsers(required=True)
    fit = rb_sub.add_parser("fit", help="fit the line of a baseline family; effective robustness", epilog=example(
        "robustvlm robustness fit evals/vlm2vec/results.csv --ref imagenet --shift imagenet_sketch --baseline clip "
        "--out fits/sketch"))
    fit.add_argument("results", help="CSV with columns model, family, bench, accuracy, n")
    fit.add_argument("--ref", required=True, help="reference benchmark")
    fit.add_argument("--shift", required=True, help="shifted benchmark")
    fit.add_argument("--baseline", help="family whose models define the line (default: all)")
    fit.add_argument("--transform", default="probit", choices=["probit", "logit"],
                     help="the scale both accuracies are fitted on (probit)")
    fit.add_argument("--out", default="robustness_fit", help="folder for fit.json and scatter.png (robustness_fit)")
    fit.add_argument("--resume", action="store_true", help="write into a folder that holds this same fit")
    fit.set_defaults(func=_robustness_fit)
    sim = rb_sub.add_parser(
        "simulate", help="the Gaussian location model behind accuracy on the line",
        epilog=example("robustvlm robustness simulate --out runs/simulate"),
    )
    sim.add_argument("--out", default="robustness_simulate",
                     help="folder for simulate.json and simulate.png (robustness_simulate)")
    sim.add_argument("--seed", type=int_at_least(0), default=0, help="seed of the simulated models (0)")
    sim.add_argument("--resume", action="store_true", help="write into a folder that holds this same simulation")
    sim.set_defaults(func=_robustness_simulate)
    ts = rb_sub.add_parser(
        "task-signal",
        help="caption- vs VQA-style embedding training on one frozen vision tower: one line per family, "
        "the lift between them with bootstrap CIs (built-in config: digits, tiny models, < 15 min on 2 cores)",
        epilog=example("robustvlm robustness task-signal --quick --out ts_quick"),
    )
    ts.add_argument("config", nargs="?", type=config_file, help="YAML (default: the built-in configs/task_signal.yaml)")
    ts.add_argument("overrides", nargs="*", help="key=value overrides, e.g. workers=1")
    ts.add_argument("--quick", action="store_true", help="merge the config's `quick` part (a smoke test)")
    ts.add_argument("--out", help="default task_signal (task_signal_quick with --quick)")
    ts.add_argument("--resume", action="store_true", help=RESUME_HELP)
    ts.set_defaults(func=_robustness_task_signal, config_optional=True)
