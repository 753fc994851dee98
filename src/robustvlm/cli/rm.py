"""`robustvlm rm`: multimodal reward models: data, training, matrices, Best-of-N."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from robustvlm.cli.options import (
    IMAGE_ROOT_HELP,
    OUTSIDE_ROOT_HELP,
    RESUME_HELP,
    SubParsers,
    add_train_parser,
    config_file,
    float_at_least,
    float_in_unit_interval,
    int_at_least,
)
from robustvlm.errors import ConfigError

if TYPE_CHECKING:
    from robustvlm.data.records import SkipLog


def _pair_options(args: argparse.Namespace) -> dict:
    """The preference-reading options every `rm` command that reads pairs shares."""
    return {"fmt": args.format, "split": args.split, "image_root": args.image_root,
            "allow_outside_root": args.allow_outside_root, "env_column": args.env_column,
            "aspect": args.aspect}


def _rm_data_check(args: argparse.Namespace) -> int:
    from robustvlm.data.preference_check import check_pairs

    report = check_pairs(args.path, test_path=args.test, **_pair_options(args))
    print(report.format())
    return 0 if report.ok else 1


def _rm_train(args: argparse.Namespace) -> int:
    from robustvlm.config import RewardConfig, load_config
    from robustvlm.workflows.reward.train import train_reward_model

    cfg = load_config(args.config, args.overrides, RewardConfig)
    result = train_reward_model(cfg, args.out or Path("runs") / Path(args.config).stem, resume=args.resume)
    print(f"reward model: {Path(result.final_dir).resolve()}")
    return 0


def _read_pairs_for(args: argparse.Namespace, skipped: SkipLog | None = None) -> tuple[list, dict]:
    """The pairs of --data and the options they were read with (stored with a run's settings);
    with a SkipLog `skipped`, bad records are counted there instead of stopping the command."""
    from robustvlm.data.preferences import load_pairs

    options = {**_pair_options(args), "split": None}
    on_bad = "skip" if skipped is not None else "error"
    pairs = load_pairs(args.data, verbose=False, on_bad_record=on_bad, skip_log=skipped, **options).pairs
    return pairs, {"path": args.data, **{k: v for k, v in options.items() if k != "split"}}


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
    pairs, data = _read_pairs_for(args, skipped)
    metrics = evaluate_reward_model(args.model, pairs, args.out, cfg=cfg, data=data, resume=args.resume,
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
    from robustvlm.workflows.reward.matrix import run_matrix

    name = Path(args.config).stem + ("-dry-run" if args.dry_run else "")
    out = args.out or Path("studies") / name
    table = summary_table(run_matrix(args.config, out, dry_run=args.dry_run).results)
    print(markdown_table(table.header, table.rows))
    print(f"report: {Path(out).resolve() / 'report.md'} and {Path(out).resolve() / 'report.html'}")
    return 0


def _rm_sample(args: argparse.Namespace) -> int:
    from robustvlm.config import JudgeConfig, RewardEvalConfig, validate_config
    from robustvlm.workflows.reward.evaluate import eval_pairs
    from robustvlm.workflows.reward.sample import Sampling, sample_candidates

    if (args.policy is None) == (args.server is None):
        raise ConfigError("give exactly one of --policy MODEL or --server URL")
    if args.server is not None and args.server_model is None:
        raise ConfigError("--server needs --server-model (the model name the server serves)")
    server = validate_config(
        {"base_url": args.server, "model": args.server_model, "api_key_env": args.api_key_env},
        "--server", JudgeConfig,
    ) if args.server else None
    pairs, data = _read_pairs_for(args)
    prompts = eval_pairs(pairs, RewardEvalConfig(split=args.split or "test", max_per_env=args.max_per_env))
    sampling = Sampling(k=args.k, temperature=args.temperature, top_p=args.top_p,
                        max_new_tokens=args.max_new_tokens, seed=args.seed)
    path = sample_candidates(prompts, args.out, sampling=sampling, policy=args.policy, server=server,
                             data=data, resume=args.resume)
    print(f"wrote {path}")
    return 0


def _rm_score(args: argparse.Namespace) -> int:
    from robustvlm.config import load_judge_config
    from robustvlm.workflows.reward.score import score_candidates

    judge = load_judge_config(args.judge) if args.judge else None
    path = score_candidates(args.candidates, args.out, model=args.model, gold=args.gold, judge=judge,
                            shared_prefix=not args.full_sequences, resume=args.resume)
    print(f"wrote {path}")
    return 0


def _rm_bon(args: argparse.Namespace) -> int:
    from robustvlm.workflows.reward.bon import run_bon

    scores = {}
    for item in args.scores:
        label, sep, path = item.partition("=")
        if not sep or not label or not path:
            raise ConfigError(f"--scores takes LABEL=SCORES.jsonl, not {item!r}")
        scores[label] = path
    results = run_bon(scores, args.out, gold=args.gold, resume=args.resume)
    for label, result in results.items():
        curve = ", ".join(f"N={r['n']}: {r['mean']:.3f}" for r in result["curve"])
        print(f"{label}: {curve} ({result['curve'][0]['n_prompts']} prompts)")
    print(f"wrote {Path(args.out) / 'bon.json'} and bon.png")
    return 0


def _add_pair_options(parser: argparse.ArgumentParser) -> None:
    from robustvlm.data.preference_layouts import PREFERENCE_FORMATS

    parser.add_argument("--format", default="auto", help=f"preference layout: {' | '.join(PREFERENCE_FORMATS)} "
                        "(auto recognises it from the columns and says which)")
    parser.add_argument("--split", help="keep only this split (train | val | test); for hf: the split loaded")
    parser.add_argument("--image-root", metavar="DIR", help=IMAGE_ROOT_HELP + "; COCO's folder for POVID")
    parser.add_argument("--allow-outside-root", action="store_true", help=OUTSIDE_ROOT_HELP)
    parser.add_argument("--env-column", help="record field that names the environment (default env)")
    parser.add_argument("--aspect", default="mean", help="VLFeedback rating pairs are formed by: an aspect "
                        "(Helpfulness, 'Visual Faithfulness', 'Ethical Considerations') or mean")


def add_rm(sub: SubParsers) -> None:
    """rm data check, rm train, rm eval, rm matrix, rm sample, rm score, rm bon."""
    rm = sub.add_parser("rm", help="multimodal reward models: data, training, matrices, Best-of-N")
    rm_sub = rm.add_subparsers(dest="rm_command", required=True)

    rd = rm_sub.add_parser("data", help="check preference data")
    rd_sub = rd.add_subparsers(dest="rm_data_command", required=True)
    rc = rd_sub.add_parser("check", help="validate pairs (exit 1 on bad records); train / test overlap")
    rc.add_argument("path", help="preference data: JSONL, JSON, parquet, a saved dataset or hf:NAME")
    rc.add_argument("--test", help="a test set to check for images and queries shared with PATH")
    _add_pair_options(rc)
    rc.set_defaults(func=_rm_data_check)

    add_train_parser(rm_sub, "train a reward model from a YAML config", "loss=shortcut_aware", _rm_train)
    _add_rm_eval(rm_sub)

    rmx = rm_sub.add_parser("matrix", help="train on each environment x test on every one, several "
                            "losses and seeds -> matrices, SFD, report (resumable)")
    rmx.add_argument("config", type=config_file, help="matrix YAML: base, losses, seeds, train_envs, per_env, jobs")
    rmx.add_argument("--out", help="output directory (default studies/<config name>[-dry-run])")
    rmx.add_argument("--dry-run", action="store_true", help="the same recipe on a tiny offline model and "
                     "built-in data for a few steps, first seed")
    rmx.set_defaults(func=_rm_matrix)

    _add_rm_sample(rm_sub)
    _add_rm_score_and_bon(rm_sub)


def _add_rm_eval(rm_sub: SubParsers) -> None:
    """rm eval."""
    re_ = rm_sub.add_parser("eval", help="pairwise accuracy per environment, with the text-only test")
    re_.add_argument("--model", required=True, help="a reward model folder (RUN/final)")
    re_.add_argument("--data", required=True, help="preference data")
    re_.add_argument("--out", required=True)
    re_.add_argument("--max-per-env", type=int_at_least(1), default=None)
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
    _add_pair_options(re_)
    re_.set_defaults(func=_rm_eval)


def _add_rm_sample(rm_sub: SubParsers) -> None:
    """rm sample."""
    rs = rm_sub.add_parser("sample", help="K candidate responses per prompt from a policy (Best-of-N)")
    rs.add_argument("--data", required=True, help="preference data whose (image, query) are the prompts")
    rs.add_argument("--out", required=True)
    rs.add_argument("--policy", help="a VLM (hub name, folder or tiny:...) sampled by robustvlm")
    rs.add_argument("--server", metavar="URL", help="an OpenAI-compatible API root, e.g. http://localhost:8000/v1")
    rs.add_argument("--server-model", help="the model name the server serves")
    rs.add_argument("--api-key-env", help="NAME of the environment variable holding the server's key")
    rs.add_argument("--k", type=int_at_least(2), default=16, help="candidates per prompt")
    rs.add_argument("--temperature", type=float_at_least(0.0), default=1.0)
    rs.add_argument("--top-p", type=float_in_unit_interval, default=0.95)
    rs.add_argument("--max-new-tokens", type=int_at_least(1), default=64)
    rs.add_argument("--seed", type=int_at_least(0), default=0)
    rs.add_argument("--max-per-env", type=int_at_least(1), default=None, help="prompts per environment")
    rs.add_argument("--resume", action="store_true", help=RESUME_HELP)
    _add_pair_options(rs)
    rs.set_defaults(func=_rm_sample)


def _add_rm_score_and_bon(rm_sub: SubParsers) -> None:
    """rm score, rm bon."""
    rsc = rm_sub.add_parser("score", help="rewards and gold scores of sampled candidates (resumable)")
    rsc.add_argument("--candidates", required=True, help="candidates.jsonl written by rm sample")
    rsc.add_argument("--model", required=True, help="a reward model folder")
    rsc.add_argument("--out", required=True)
    rsc.add_argument("--gold", default="chrf", choices=["chrf", "exact", "judge"],
                     help="gold score: agreement with the reference answer (chrf, exact) or the CEE judge")
    rsc.add_argument("--judge", help="YAML with the judge endpoint for --gold judge")
    rsc.add_argument("--full-sequences", action="store_true", help="no shared prompt cache")
    rsc.add_argument("--resume", action="store_true", help=RESUME_HELP)
    rsc.set_defaults(func=_rm_score)

    rb = rm_sub.add_parser("bon", help="Best-of-N curves (unbiased estimator) from rm score outputs")
    rb.add_argument("--scores", action="append", required=True, metavar="LABEL=SCORES.jsonl",
                    help="one reward model's scores; repeat to compare several")
    rb.add_argument("--out", required=True)
    rb.add_argument("--gold", default="chrf", help="the gold score's name on the plot")
    rb.add_argument("--resume", action="store_true", help=RESUME_HELP)
    rb.set_defaults(func=_rm_bon)
