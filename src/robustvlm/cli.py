"""The `robustvlm` command line: parse, load config, call one function per subcommand."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from robustvlm.errors import RobustVLMError


def _data_check(args: argparse.Namespace) -> int:
    from robustvlm.data.check import check_dataset

    report = check_dataset(
        args.path,
        fmt=args.format,
        env_column=args.env_column,
        env_map=args.env_map,
        task_rules=args.task_rules,
    )
    print(report.format())
    return 0 if report.ok else 1


def _data_synth(args: argparse.Namespace) -> int:
    from robustvlm.data.synth import synthesize

    manifest = synthesize(args.benchmark, Path(args.out), seed=args.seed, n_per_env=args.n_per_env)
    print(f"wrote {args.benchmark} to {args.out} (manifest: {manifest})")
    return 0


def _train(args: argparse.Namespace) -> int:
    from robustvlm.config import load_config
    from robustvlm.training.trainer import train

    cfg = load_config(args.config, args.overrides)
    out = Path(args.out or Path("runs") / Path(args.config).stem)
    result = train(cfg, out, resume=args.resume)
    print(f"final model: {result.final_dir}")
    return 0


def _eval(args: argparse.Namespace) -> int:
    from robustvlm.config import EvalConfig
    from robustvlm.data.loaders import load_examples
    from robustvlm.evaluation.runner import evaluate
    from robustvlm.report.tables import env_table

    examples = load_examples(args.data, env_map=args.env_map, task_rules=args.task_rules)
    cfg = EvalConfig(
        split=args.split,
        batch_size=args.batch_size,
        max_new_tokens=args.max_new_tokens,
        repetition_penalty=args.repetition_penalty,
        max_per_env=args.max_per_env,
    )
    metrics = evaluate(args.model, examples, args.out, cfg=cfg, resume=args.resume)
    print(env_table(metrics, "chrf"))
    return 0


def _demo(args: argparse.Namespace) -> int:
    from robustvlm.demo import run_demo

    run_demo(args.out, quick=args.quick, overrides=args.overrides)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="robustvlm", description=__doc__.split(":")[0] + ".")
    sub = parser.add_subparsers(dest="command", required=True)

    data = sub.add_parser("data", help="check datasets and synthesise the built-in benchmarks")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    check = data_sub.add_parser(
        "check", help="validate a dataset; list every bad record (exit 1 if any)"
    )
    check.add_argument("path")
    check.add_argument("--format", default="auto", help="auto|jsonl|json|llava|parquet|hf|folder")
    check.add_argument("--env-map", help="YAML mapping source names to environments")
    check.add_argument("--env-column", help="record field that holds the environment")
    check.add_argument(
        "--task-rules", action="store_true", help="assign task types from the instruction"
    )
    check.set_defaults(func=_data_check)
    synth = data_sub.add_parser("synth", help="write a built-in synthetic benchmark")
    synth.add_argument("--benchmark", required=True, help="tasks | spurious | digits | domains")
    synth.add_argument("--out", required=True)
    synth.add_argument("--seed", type=int, default=0)
    synth.add_argument("--n-per-env", type=int, default=None)
    synth.set_defaults(func=_data_synth)

    tr = sub.add_parser("train", help="fine-tune a VLM from a YAML config")
    tr.add_argument("config")
    tr.add_argument("overrides", nargs="*", help="key=value overrides, e.g. train.lr=1e-4")
    tr.add_argument("--out", help="run directory (default runs/<config name>)")
    tr.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    tr.set_defaults(func=_train)

    ev = sub.add_parser("eval", help="generate and score a model on a dataset")
    ev.add_argument("--model", required=True, help="model directory (e.g. RUN/final) or hub name")
    ev.add_argument("--data", required=True)
    ev.add_argument("--out", required=True)
    ev.add_argument(
        "--resume", action="store_true", help="skip examples already in predictions.jsonl"
    )
    ev.add_argument("--split", default="test")
    ev.add_argument("--batch-size", type=int, default=8)
    ev.add_argument("--max-new-tokens", type=int, default=128)
    ev.add_argument("--repetition-penalty", type=float, default=1.15)
    ev.add_argument("--max-per-env", type=int, default=None)
    ev.add_argument("--env-map")
    ev.add_argument("--task-rules", action="store_true")
    ev.set_defaults(func=_eval)

    dm = sub.add_parser("demo", help="built-in data -> fine-tune a tiny VLM -> evaluate ID vs OOD")
    dm.add_argument("overrides", nargs="*", help="key=value overrides of the demo config")
    dm.add_argument("--quick", action="store_true", help="a smaller run (about 2 minutes)")
    dm.add_argument("--out", default="demo_out")
    dm.set_defaults(func=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `robustvlm` console script."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except RobustVLMError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "interrupted: finished work is kept; re-run with --resume to continue", file=sys.stderr
        )
        return 130


if __name__ == "__main__":
    sys.exit(main())
