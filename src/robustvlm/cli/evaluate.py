"""`robustvlm eval`: generate and score a model on a dataset."""

from __future__ import annotations

import argparse

from robustvlm.cli.merge import add_shard_option
from robustvlm.cli.options import (
    BLIND_HELP,
    IMAGE_ROOT_HELP,
    OUTSIDE_ROOT_HELP,
    RESUME_HELP,
    SubParsers,
    add_decoding_options,
    add_served_options,
    example,
    int_at_least,
    served,
)


def _eval(args: argparse.Namespace) -> int:
    from robustvlm.model_ref import ModelRef
    from robustvlm.report.tables import env_table
    from robustvlm.workflows.finetune.evaluate import run_eval

    settings = {
        "split": args.split,
        "batch_size": args.batch_size,
        "max_new_tokens": args.max_new_tokens,
        "repetition_penalty": args.repetition_penalty,
        "max_per_env": args.max_per_env,
        "metrics": args.metrics.split(","),
    }
    metrics = run_eval(
        ModelRef.parse(args.model), args.data, args.out, settings=settings, judge_file=args.judge,
        env_map=args.env_map, task_rules=args.task_rules, image_root=args.image_root,
        allow_outside_root=args.allow_outside_root,
        resume=args.resume, served=served(args), blind=args.blind,
    )
    print(env_table(metrics, "chrf"))
    if args.blind:
        from robustvlm.report.vision_gain import gain_summary

        print(gain_summary(args.out))
    return 0


def _metrics_help() -> str:
    """The eval command's --metrics help, from the metrics registry."""
    from robustvlm.evaluation.metrics.registry import METRICS, Metric, per_batch_metrics

    def one(m: Metric) -> str:
        about = f"{m.name} ({m.title}): {m.scale}, {'higher' if m.higher_is_better else 'lower'} is better"
        needs = m.needs
        if needs is None:
            return about
        if needs.required:
            return f"{about}, needs the {needs.what}: {needs.how}"
        return f"{about}, {needs.what}: {needs.how}, default {needs.default}"

    always = ", ".join(m.name for m in per_batch_metrics())
    return (
        f"comma-separated, of: {'; '.join(one(m) for m in METRICS.values())}; "
        f"{always} are always computed; the judge comes from --judge"
    )


def add_eval(sub: SubParsers) -> None:
    ev = sub.add_parser("eval", help="generate and score a model on a dataset", epilog=example(
        "robustvlm eval --model runs/erm/final --data data/tasks --out runs/erm/eval"))
    ev.add_argument("--model", required=True,
                    help="model directory (e.g. RUN/final), hub name, or openai:MODEL with --base-url")
    ev.add_argument("--data", required=True, help="instruction data: a record file or folder (any loader)")
    ev.add_argument("--out", required=True, help="folder for predictions.jsonl and metrics.json")
    ev.add_argument("--resume", action="store_true", help=RESUME_HELP)
    ev.add_argument("--split", default="test", help="which records of --data to score (test)")
    ev.add_argument("--batch-size", type=int_at_least(1), default=8, help="prompts per generation batch (8)")
    ev.add_argument("--max-per-env", type=int_at_least(1), default=None,
                    help="score at most N records of each environment (default: all)")
    ev.add_argument("--metrics", default="chrf,exact", help=_metrics_help())
    ev.add_argument(
        "--judge", help="YAML with the judge endpoint for cee: base_url, model, api_key_env, ..."
    )
    ev.add_argument("--env-map", help="YAML mapping source names (or record ids) to environments")
    ev.add_argument("--task-rules", action="store_true",
                    help="assign each record's environment (task type) from its instruction")
    ev.add_argument("--blind", action="store_true", help=BLIND_HELP)
    ev.add_argument("--image-root", metavar="DIR", help=IMAGE_ROOT_HELP)
    ev.add_argument("--allow-outside-root", action="store_true", help=OUTSIDE_ROOT_HELP)
    add_shard_option(ev)
    add_decoding_options(ev, max_new_tokens=128)
    add_served_options(ev)
    ev.set_defaults(func=_eval)
