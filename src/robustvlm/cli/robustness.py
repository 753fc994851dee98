"""`robustvlm robustness`: accuracy-on-the-line fits, effective robustness, the task-signal study."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from robustvlm.cli.options import (
    RESUME_HELP,
    SubParsers,
    config_file,
    example,
    float_above,
    int_at_least,
)
from robustvlm.cli.output_checks import output_file
from robustvlm.cli.results_options import add_results_options, n_questions, read_options
from robustvlm.data.results.formats import result_format_choices

if TYPE_CHECKING:
    from robustvlm.analysis.group_lines import GroupLine


def _robustness_fit(args: argparse.Namespace) -> int:
    from robustvlm.workflows.measure.group_fit import place_baseline_table, write_group_lines
    from robustvlm.workflows.measure.robustness_fit import fit_from_results

    sizes, options = n_questions(args), read_options(args)
    extra = {"baseline_table": args.baseline_table, "baseline_table_format": args.baseline_table_format}
    result = fit_from_results(args.results, ref=args.ref, shift=args.shift, baseline=args.baseline,
                              transform=args.transform, out_dir=args.out, resume=args.resume, fmt=args.format,
                              group_by=args.group_by, n_questions=sizes, extra_settings=extra, options=options)
    line = result.fit
    print(f"{args.transform} line: slope {line.slope:.3f}, intercept {line.intercept:.3f}, "
          f"r2 {line.r2:.3f} over {line.n} models; wrote {args.out}/fit.json, scatter.png")
    out = Path(args.out)
    if args.group_by:
        print(f"\neffective robustness (points) of each {args.group_by} against "
              f"{args.baseline or 'the line of the other groups'}, 95% intervals over models / models and questions:")
        for g in write_group_lines(result, out, group_by=args.group_by, n_boot=args.n_boot):
            print("  " + _group_line(g))
        print(f"wrote {args.out}/groups.json, groups.png")
    if args.baseline_table:
        print(f"\nyour models against the line of {args.baseline or 'all models'} (ER in points, 95% interval):")
        for m in place_baseline_table(result, args.baseline_table, out, fmt=args.baseline_table_format,
                                      n_questions=sizes, n_boot=args.n_boot, options=options):
            print(f"  {m.point.model}: {100 * m.er.value:+.1f} [{100 * m.er.ci[0]:+.1f}, {100 * m.er.ci[1]:+.1f}]")
        print(f"wrote {args.out}/placed.json")
    return 0


def _group_line(g: GroupLine) -> str:
    """One group's line and effective robustness, for the terminal."""
    line = f"slope {g.line.slope:.2f}, r2 {g.line.r2:.2f}" if g.line else "no line (fewer than 2 distinct models)"
    er = "baseline"
    for estimate in (g.er_models, g.er_questions):
        if estimate is not None:
            er = (f"{100 * estimate.value:+.1f} [{100 * estimate.ci[0]:+.1f}, {100 * estimate.ci[1]:+.1f}]"
                  if er == "baseline" else f"{er} / [{100 * estimate.ci[0]:+.1f}, {100 * estimate.ci[1]:+.1f}]")
    return f"{g.group} ({g.models} models): {line}; ER {er}"


def _robustness_subsets(args: argparse.Namespace) -> int:
    from robustvlm.workflows.measure.subsets import subsets_from_results

    report = subsets_from_results(args.results, ref=args.ref, shift=args.shift, out_dir=args.out, by=args.by,
                                  fmt=args.format, fraction=args.worst_fraction, resume=args.resume,
                                  options=read_options(args))
    lines, worst = report.lines, report.worst
    print(f"{len(report.models)} models; average line: slope {lines.average.slope:.2f}, r2 {lines.average.r2:.2f}")
    for s in lines.subsets:
        mark = "shares" if s.shares_slope else "differs from"
        print(f"  {s.subset} ({s.questions} questions): slope {s.line.slope:.2f} "
              f"[{s.slope_ci[0]:.2f}, {s.slope_ci[1]:.2f}], r2 {s.line.r2:.2f}; {mark} the average slope")
    print(f"{lines.share_on_average_slope:.0%} of the shifted questions lie in subsets on the average slope")
    print(f"worst {len(worst.questions)} questions (searched on {len(worst.search_models)} models): r2 "
          f"{worst.search_r2:.2f} there, {worst.held_out_r2:.2f} on the {len(worst.held_out_models)} held-out "
          f"models (the rest: {worst.held_out_rest_r2:.2f}); wrote {args.out}/subsets.json")
    return 0


def _robustness_convert(args: argparse.Namespace) -> int:
    from robustvlm.workflows.measure.convert_results import convert_results

    done = convert_results(args.results, args.out, fmt=args.format, benches=args.benchmark, n_questions=n_questions(args),
                           questions_out=args.questions, options=read_options(args))
    print(f"wrote {done.csv_rows} rows to {args.out}"
          + (f" and {done.question_rows} question rows to {args.questions}" if args.questions else ""))
    if done.left_out:
        print(f"left out (no question count; give --n-questions BENCH=N): {', '.join(done.left_out)}")
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
    """robustness fit, subsets, convert, simulate, task-signal."""
    rb = sub.add_parser("robustness", help="accuracy-on-the-line fits and effective robustness",
                        epilog=example('robustvlm robustness fit docs/data/openclip_results.csv --ref "ImageNet 1k" '
                                       '--shift "ImageNet-R" --out runs/openclip_fit'))
    rb_sub = rb.add_subparsers(required=True)
    fit = rb_sub.add_parser("fit", help="fit the line of a baseline family; effective robustness", epilog=example(
        "robustvlm robustness fit evals/vlm2vec/results.csv --ref imagenet --shift imagenet_sketch --baseline clip "
        "--out fits/sketch"))
    fit.add_argument("results", help="a results file: robustvlm's CSV (model, family, bench, accuracy, n), "
                     "open_clip's table, clip_benchmark's, lmms-eval's or VLMEvalKit's files (see --format)")
    fit.add_argument("--ref", required=True, help="reference benchmark")
    fit.add_argument("--shift", required=True, help="shifted benchmark")
    fit.add_argument("--baseline", help="family (with --group-by: group) whose models define the line (default: all)")
    fit.add_argument("--transform", default="probit", choices=["probit", "logit"],
                     help="the scale both accuracies are fitted on (probit)")
    fit.add_argument("--out", default="robustness_fit", help="folder for fit.json and scatter.png (robustness_fit)")
    fit.add_argument("--resume", action="store_true", help="write into a folder that holds this same fit")
    add_results_options(fit)
    fit.add_argument("--group-by", metavar="COLUMN", help="a line per value of this column (e.g. source, "
                     "pretrained, family) and each group's effective robustness against --baseline's line (default: "
                     "each against the other groups' line), with bootstrap intervals; writes groups.json, groups.png")
    fit.add_argument("--baseline-table", metavar="FILE", help="your own models' results (any format): each placed "
                     "against the fitted line, its effective robustness with an interval; writes placed.json")
    fit.add_argument("--baseline-table-format", default="auto", choices=result_format_choices(),
                     help="--format of --baseline-table (default auto: detected)")
    fit.add_argument("--n-boot", type=int_at_least(100), default=2000,
                     help="bootstrap resamples of the group and placement intervals")
    fit.set_defaults(func=_robustness_fit)
    _add_subsets(rb_sub)
    _add_convert(rb_sub)
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
        "the lift between them with bootstrap CIs (built-in config: digits, tiny models)",
        epilog=example("robustvlm robustness task-signal --quick --out ts_quick"),
    )
    ts.add_argument("config", nargs="?", type=config_file, help="YAML (default: the built-in configs/task_signal.yaml)")
    ts.add_argument("overrides", nargs="*", help="key=value overrides, e.g. workers=1")
    ts.add_argument("--quick", action="store_true", help="merge the config's `quick` part (a smoke test)")
    ts.add_argument("--out", help="default task_signal (task_signal_quick with --quick)")
    ts.add_argument("--resume", action="store_true", help=RESUME_HELP)
    ts.set_defaults(func=_robustness_task_signal, config_optional=True)


def _add_subsets(rb_sub: SubParsers) -> None:
    """robustness subsets."""
    sub_ = rb_sub.add_parser("subsets", help="per-question results of several models: a line per subset of the "
                             "shifted questions (class, environment) and a held-out search for the questions where "
                             "ID accuracy predicts shifted accuracy worst", epilog=example(
                             "robustvlm robustness subsets docs/data/vlmevalkit_work --ref MMBench_DEV_EN "
                             "--shift MMStar --by category --out runs/subsets"))
    sub_.add_argument("results", nargs="+", help="per-question results files or folders (one or more per model, or "
                      "a VLMEvalKit work folder of many models)")
    sub_.add_argument("--ref", required=True, help="reference benchmark (each model's accuracy on it)")
    sub_.add_argument("--shift", required=True, help="shifted benchmark (its per-question scores)")
    sub_.add_argument("--by", default="env", help="the question column that names its subset (default env: "
                      "VLMEvalKit's category, lmms-eval's task)")
    sub_.add_argument("--worst-fraction", type=float_above(0), default=0.25, help="share of the shifted questions the search "
                      "picks (default 0.25)")
    sub_.add_argument("--out", default="robustness_subsets",
                      help="folder for subsets.json, subsets.md and the plots (robustness_subsets)")
    sub_.add_argument("--resume", action="store_true", help="write into a folder that holds this same analysis")
    add_results_options(sub_, counts=False)
    sub_.set_defaults(func=_robustness_subsets)


def _add_convert(rb_sub: SubParsers) -> None:
    """robustness convert."""
    conv = rb_sub.add_parser("convert", help="rewrite another tool's results file as robustvlm's results CSV "
                             "(and its per-question rows as JSONL)", epilog=example(
                             "robustvlm robustness convert docs/data/openclip_results.csv --out runs/openclip_long.csv"))
    conv.add_argument("results", help="a results file or folder of any --format")
    conv.add_argument("--out", required=True, type=output_file,
                      help="the CSV to write (model, family, bench, accuracy, n, ...); an earlier one of its own is replaced")
    conv.add_argument("--benchmark", action="append", default=[], help="keep only this benchmark (repeatable)")
    conv.add_argument("--questions", metavar="FILE", type=output_file, help="also write the per-question rows here (JSONL)")
    add_results_options(conv, non_accuracy=True)
    conv.set_defaults(func=_robustness_convert)
