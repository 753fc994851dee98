"""`robustvlm rm sample`, `rm score` and `rm bon`: Best-of-N with reward models, from sampling
candidates to the curves."""

from __future__ import annotations

import argparse
from pathlib import Path

from robustvlm.cli.options import (
    RESUME_HELP,
    SubParsers,
    example,
    float_at_least,
    float_in_unit_interval,
    int_at_least,
    renamed,
)
from robustvlm.cli.rm_pairs import add_pair_options, read_pairs_for
from robustvlm.errors import ConfigError
from robustvlm.model_ref import ModelRef


def _rm_sample(args: argparse.Namespace) -> int:
    from robustvlm.config import JudgeConfig, RewardEvalConfig, validate_config
    from robustvlm.workflows.reward.evaluate import eval_pairs
    from robustvlm.workflows.reward.sample import Sampling, sample_candidates

    if (args.policy is None) == (args.base_url is None):
        raise ConfigError("give exactly one of --policy MODEL or --base-url URL")
    if args.base_url is not None and args.server_model is None:
        raise ConfigError("--base-url needs --server-model (the model name the server serves)")
    server = validate_config(
        {"base_url": args.base_url, "model": args.server_model, "api_key_env": args.api_key_env},
        "--base-url", JudgeConfig,
    ) if args.base_url else None
    pairs, data = read_pairs_for(args)
    prompts = eval_pairs(pairs, RewardEvalConfig(split=args.split or "test", max_per_env=args.max_per_env))
    sampling = Sampling(k=args.k, temperature=args.temperature, top_p=args.top_p,
                        max_new_tokens=args.max_new_tokens, seed=args.seed)
    path = sample_candidates(prompts, args.out, sampling=sampling,
                             policy=ModelRef.parse(args.policy) if args.policy is not None else None, server=server,
                             data=data, resume=args.resume)
    print(f"wrote {path}")
    return 0


def _rm_score(args: argparse.Namespace) -> int:
    from robustvlm.config import load_judge_config
    from robustvlm.workflows.reward.score import score_candidates

    judge = load_judge_config(args.judge) if args.judge else None
    path = score_candidates(args.candidates, args.out, model=ModelRef.parse(args.model), gold=args.gold, judge=judge,
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


def add_bon_commands(rm_sub: SubParsers) -> None:
    """rm sample, rm score, rm bon."""
    _add_rm_sample(rm_sub)
    _add_rm_score_and_bon(rm_sub)


def _add_rm_sample(rm_sub: SubParsers) -> None:
    """rm sample."""
    rs = rm_sub.add_parser("sample", help="K candidate responses per prompt from a policy (Best-of-N)", epilog=example(
        "robustvlm rm sample --data runs/rm_shortcut_aware/data --policy tiny:idefics3 --k 4 --out runs/bon/samples"))
    rs.add_argument("--data", required=True, help="preference data whose (image, query) are the prompts")
    rs.add_argument("--out", required=True, help="folder for candidates.jsonl")
    rs.add_argument("--policy", help="a VLM (hub name, folder or tiny:...) sampled by robustvlm")
    renamed(rs, "--server", rs.add_argument("--base-url", metavar="URL",
                                            help="an OpenAI-compatible API root, e.g. http://localhost:8000/v1"))
    rs.add_argument("--server-model", help="the model name the server serves")
    rs.add_argument("--api-key-env", help="NAME of the environment variable holding the server's key")
    rs.add_argument("--k", type=int_at_least(2), default=16, help="candidates per prompt")
    rs.add_argument("--temperature", type=float_at_least(0.0), default=1.0, help="sampling temperature (1.0)")
    rs.add_argument("--top-p", type=float_in_unit_interval, default=0.95, help="nucleus sampling mass (0.95)")
    rs.add_argument("--max-new-tokens", type=int_at_least(1), default=64, help="longest candidate, in tokens (64)")
    rs.add_argument("--seed", type=int_at_least(0), default=0, help="sampling seed, drawn per prompt (0)")
    rs.add_argument("--max-per-env", type=int_at_least(1), default=None, help="prompts per environment")
    rs.add_argument("--resume", action="store_true", help=RESUME_HELP)
    add_pair_options(rs)
    rs.set_defaults(func=_rm_sample)


def _add_rm_score_and_bon(rm_sub: SubParsers) -> None:
    """rm score, rm bon."""
    rsc = rm_sub.add_parser("score", help="rewards and gold scores of sampled candidates (resumable)", epilog=example(
        "robustvlm rm score --candidates runs/bon/samples/candidates.jsonl --model runs/rm_shortcut_aware/final "
        "--out runs/bon/scores"))
    rsc.add_argument("--candidates", required=True, help="candidates.jsonl written by rm sample")
    rsc.add_argument("--model", required=True, help="a reward model folder")
    rsc.add_argument("--out", required=True, help="folder for scores.jsonl")
    rsc.add_argument("--gold", default="chrf", choices=["chrf", "exact", "judge"],
                     help="gold score: agreement with the reference answer (chrf, exact) or the CEE judge")
    rsc.add_argument("--judge", help="YAML with the judge endpoint for --gold judge")
    rsc.add_argument("--full-sequences", action="store_true", help="no shared prompt cache")
    rsc.add_argument("--resume", action="store_true", help=RESUME_HELP)
    rsc.set_defaults(func=_rm_score)

    rb = rm_sub.add_parser("bon", help="Best-of-N curves (unbiased estimator) from rm score outputs", epilog=example(
        "robustvlm rm bon --scores shortcut_aware=runs/bon/scores/scores.jsonl --out runs/bon/curves"))
    rb.add_argument("--scores", action="append", required=True, metavar="LABEL=SCORES.jsonl",
                    help="one reward model's scores; repeat to compare several")
    rb.add_argument("--out", required=True, help="folder for bon.json and bon.png")
    rb.add_argument("--gold", default="chrf", help="the gold score's name on the plot")
    rb.add_argument("--resume", action="store_true", help=RESUME_HELP)
    rb.set_defaults(func=_rm_bon)
