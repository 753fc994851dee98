"""`robustvlm rm`: multimodal reward models: data, training, matrices, Best-of-N."""

from __future__ import annotations

import argparse
from pathlib import Path

from robustvlm.cli.bon import add_bon_commands
from robustvlm.cli.merge import add_shard_option
from robustvlm.cli.options import (
    RESUME_HELP,
    SubParsers,
    add_train_parser,
    config_file,
    example,
    int_at_least,
)
from robustvlm.cli.rm_pairs import add_pair_options, pair_options, read_pairs_for
from robustvlm.model_ref import ModelRef


def _rm_data_check(args: argparse.Namespace) -> int:
    from robustvlm.data.preference_check import check_pairs

    report = check_pairs(args.path, test_path=args.test, **pair_options(args))
    print(report.format())
    return 0 if report.ok else 1


def _rm_train(args: argparse.Namespace) -> int:
    from robustvlm.config import RewardConfig, load_config
    from robustvlm.workflows.reward.train import train_reward_model

    cfg = load_config(args.config, args.overrides, RewardConfig)
    result = train_reward_model(cfg, args.out or Path("runs") / Path(args.config).stem, resume=args.resume)
    print(f"reward model: {Path(result.final_dir).resolve()}")
    return 0


def _rm_eval(args: argparse.Namespace) -> int:
    from robustvlm.config import RewardEvalConfig
    from robustvlm.data.records import SkipLog
    from robustvlm.report.reward_eval import reward_eval_tables
    from robustvlm.workflows.reward.evaluate import check_split, evaluate_reward_model

    cfg = RewardEvalConfig(split=args.split or "test", shared_prefix=not args.full_sequences,
                           text_only_test=not args.no_text_only_test, text_mode=args.text_mode,
                           max_per_env=args.max_per_env, swap_check=not args.no_swap_check)
    check_split(cfg, args.score_training_pairs)
    skipped = SkipLog() if args.skip_bad else None
    pairs, data = read_pairs_for(args, skipped)
    metrics = evaluate_reward_model(ModelRef.parse(args.model), pairs, args.out, cfg=cfg, data=data, resume=args.resume,
                                    skipped=skipped, training_pairs=args.score_training_pairs)
    if skipped is not None and len(skipped):
        print(f"skipped {len(skipped)} bad record(s): see {Path(args.out) / 'skipped.jsonl'}")
    if cfg.split == "train":
        print("scored the training split: accuracy on pairs the model may have been trained on")
    print(reward_eval_tables(metrics))
    return 0


def _rm_matrix(args: argparse.Namespace) -> int:
    from robustvlm.report.reward_report import summary_table
    from robustvlm.report.tables import markdown_table
    from robustvlm.workflows.reward.matrix import matrix_plan, read_matrix_spec, run_matrix
    from robustvlm.workflows.reward.matrix_dry_run import matrix_plan_lines

    name = Path(args.config).stem + ("-smoke" if args.smoke else "")
    out = args.out or Path("studies") / name
    if args.dry_run:
        plan = matrix_plan(read_matrix_spec(args.config, smoke=args.smoke))
        print("\n".join(matrix_plan_lines(plan, Path(out).absolute())))
        return 0
    table = summary_table(run_matrix(args.config, out, smoke=args.smoke).results)
    print(markdown_table(table.header, table.rows))
    print(f"report: {Path(out).resolve() / 'report.md'} and {Path(out).resolve() / 'report.html'}")
    return 0


def add_rm(sub: SubParsers) -> None:
    """rm data check, rm train, rm eval, rm matrix, rm sample, rm score, rm bon."""
    rm = sub.add_parser("rm", help="multimodal reward models: data, training, matrices, Best-of-N",
                        epilog=example("robustvlm rm train configs/reward/shortcut_aware.yaml --out runs/rm_shortcut_aware",
                                       "robustvlm rm data check runs/rm_shortcut_aware/data"))
    rm_sub = rm.add_subparsers(required=True)

    rd = rm_sub.add_parser("data", help="check preference data",
                           epilog=example("robustvlm rm data check runs/rm_shortcut_aware/data"))
    rd_sub = rd.add_subparsers(required=True)
    rc = rd_sub.add_parser("check", help="validate pairs (exit 1 on bad records); train / test overlap",
                           epilog=example("robustvlm rm data check runs/rm_shortcut_aware/data"))
    rc.add_argument("path", help="preference data: JSONL, JSON, parquet, a saved dataset or hf:NAME")
    rc.add_argument("--test", help="a test set to check for images and queries shared with PATH")
    add_pair_options(rc)
    rc.set_defaults(func=_rm_data_check)

    add_train_parser(rm_sub, "train a reward model from a YAML config", "loss=shortcut_aware", _rm_train,
                     run_example="robustvlm rm train configs/reward/shortcut_aware.yaml --out runs/rm_shortcut_aware")
    _add_rm_eval(rm_sub)

    rmx = rm_sub.add_parser("matrix", help="train on each environment x test on every one, several "
                            "losses and seeds -> matrices, SFD, report (resumable)",
                            epilog=example("robustvlm rm matrix configs/paper/shortcut_aware_rm.yaml --dry-run"))
    rmx.add_argument("config", type=config_file, help="matrix YAML: base, losses, seeds, train_envs, per_env, jobs")
    rmx.add_argument("--out", help="output directory (default studies/<config name>[-smoke])")
    rmx.add_argument("--dry-run", action="store_true",
                     help="print the plan (runs, steps, models, budget) and train nothing")
    rmx.add_argument("--smoke", action="store_true", help="check a real recipe end to end: the same recipe "
                     "on a tiny offline model and built-in data for a few steps, first seed")
    rmx.set_defaults(func=_rm_matrix)

    add_bon_commands(rm_sub)


def _add_rm_eval(rm_sub: SubParsers) -> None:
    """rm eval."""
    re_ = rm_sub.add_parser("eval", help="pairwise accuracy per environment, with the text-only test", epilog=example(
        "robustvlm rm eval --model runs/rm_shortcut_aware/final --data runs/rm_shortcut_aware/data "
        "--out runs/rm_shortcut_aware/eval"))
    re_.add_argument("--model", required=True, help="a reward model folder (RUN/final)")
    re_.add_argument("--data", required=True, help="preference data")
    re_.add_argument("--out", required=True, help="folder for metrics.json and the per-pair scores")
    re_.add_argument("--max-per-env", type=int_at_least(1), default=None,
                     help="score at most N pairs of each environment (default: all)")
    re_.add_argument("--no-text-only-test", action="store_true", help="skip scoring without the image")
    re_.add_argument("--text-mode", default="drop", choices=["drop", "blank"],
                     help="how the text-only test removes the image")
    re_.add_argument("--full-sequences", action="store_true",
                     help="score each response as its own sequence instead of sharing the prompt's cache")
    re_.add_argument("--no-swap-check", action="store_true",
                     help="skip scoring every pair a second time with chosen and rejected swapped")
    re_.add_argument("--resume", action="store_true", help=RESUME_HELP)
    re_.add_argument("--skip-bad", action="store_true",
                     help="leave bad records out (listed in OUT/skipped.jsonl, counted in metrics.json) "
                     "instead of stopping at the first")
    re_.add_argument("--score-training-pairs", action="store_true",
                     help="allow --split train (pairs the model may have been trained on; metrics.json says so)")
    add_pair_options(re_)
    add_shard_option(re_)
    re_.set_defaults(func=_rm_eval)


