"""`robustvlm icl` and `diagnose`: in-context evaluation across domains and failure diagnosis."""

from __future__ import annotations

import argparse
from pathlib import Path

from robustvlm.cli.merge import add_shard_option
from robustvlm.cli.options import (
    BLIND_HELP,
    RESUME_HELP,
    SubParsers,
    add_decoding_options,
    add_served_options,
    example,
    int_at_least,
    renamed,
    served,
)
from robustvlm.evaluation.icl_settings import (
    DEFAULTS,
    DIAGNOSE_DEFAULTS,
    POLICIES,
    InContextSettings,
)
from robustvlm.extras import require
from robustvlm.model_ref import ModelRef


def _settings(args: argparse.Namespace, shots: tuple[int, ...], policies: tuple[str, ...],
              batch_size: int) -> InContextSettings:
    """The InContextSettings of `icl eval`'s or `diagnose`'s options."""
    return InContextSettings(shots=shots, policies=policies, n_per_env=args.n_per_env, seed=args.seed,
                             batch_size=batch_size, max_new_tokens=args.max_new_tokens,
                             repetition_penalty=args.repetition_penalty)


def _icl_eval(args: argparse.Namespace) -> int:
    from robustvlm.errors import ConfigError
    from robustvlm.workflows.measure.icl_eval import run_icl

    try:
        shots = tuple(int(k) for k in args.shots.split(","))
    except ValueError:
        raise ConfigError(f"--shots {args.shots}: expected comma-separated whole numbers, e.g. 0,1,2,4") from None
    settings = _settings(args, shots, tuple(args.demos.split(",")), args.batch_size)
    run_icl(ModelRef.parse(args.model), args.data, args.out, settings, resume=args.resume, served=served(args), blind=args.blind)
    print(f"wrote {args.out}/icl_results.json and icl_results.md")
    if args.blind:
        from robustvlm.report.vision_gain import gain_summary

        print(gain_summary(args.out))
    return 0


def _icl_defined_labels(args: argparse.Namespace) -> int:
    from robustvlm.workflows.measure.defined_labels import run_defined_labels

    run_defined_labels(
        ModelRef.parse(args.model),
        args.data,
        args.out,
        query_domain=args.query_domain,
        demo_domains=tuple(args.demo_domains.split(",")) if args.demo_domains else None,
        ways=args.ways,
        shots=args.shots,
        trials=args.trials,
        seed=args.seed,
        resume=args.resume,
    )
    print((Path(args.out) / "defined_labels.md").read_text())
    return 0


def _diagnose(args: argparse.Namespace) -> int:
    from robustvlm.workflows.measure.diagnose import run_diagnosis

    if not args.descriptions:
        require("wordnet", "diagnose (class descriptions from WordNet; or give --descriptions)")

    settings = _settings(args, (0, args.shots), DIAGNOSE_DEFAULTS.policies, DIAGNOSE_DEFAULTS.batch_size)
    if run_diagnosis(ModelRef.parse(args.model), args.data, args.out, settings, descriptions=args.descriptions, resume=args.resume,
                     served=served(args)) is None:
        print(f"wrote shard {args.shard} of the in-context records into {args.out}; `robustvlm merge` joins the "
              "shards and diagnoses")
        return 0
    print((Path(args.out) / "diagnosis.md").read_text())
    return 0


def add_icl(sub: SubParsers) -> None:
    """icl eval."""
    icl = sub.add_parser("icl", help="zero-shot and in-context (k-shot) evaluation across domains",
                         epilog=example("robustvlm data synth --benchmark domains --out data/domains",
                                        "robustvlm icl eval --model tiny:idefics3 --data data/domains/digits --out "
                                        "runs/icl_digits --shots 0,1,2 --demos random,same-domain,cross-domain --n-per-env 4"))
    icl_sub = icl.add_subparsers(required=True)
    ie = icl_sub.add_parser("eval", help="k-shot accuracy per domain and demo policy", epilog=example(
        "robustvlm icl eval --model tiny:idefics3 --data data/domains/digits --out runs/icl_digits --shots 0,1,2 "
        "--demos random,same-domain,cross-domain --n-per-env 4"))
    ie.add_argument("--model", required=True, help="a model folder, hub name, or openai:MODEL with --base-url")
    ie.add_argument("--data", required=True, help="image-folder root ROOT/DOMAIN/CLASS/*.png")
    ie.add_argument("--out", required=True, help="folder for icl_results.json / .md and the per-query rows")
    ie.add_argument("--shots", default=",".join(map(str, DEFAULTS.shots)), help="comma-separated shot counts")
    ie.add_argument(
        "--demos",
        default=",".join(DEFAULTS.policies),
        help=f"comma-separated: {', '.join(POLICIES)}",
    )
    _add_query_options(ie)
    ie.add_argument("--batch-size", type=int_at_least(1), default=DEFAULTS.batch_size,
                    help="prompts per generation batch")
    ie.add_argument("--resume", action="store_true", help=RESUME_HELP)
    ie.add_argument("--blind", action="store_true", help=BLIND_HELP)
    add_decoding_options(ie, max_new_tokens=DEFAULTS.max_new_tokens)
    add_served_options(ie)
    add_shard_option(ie)
    ie.set_defaults(func=_icl_eval)
    _add_defined_labels(icl_sub)


def _add_query_options(parser: argparse.ArgumentParser) -> None:
    """--n-per-env and --seed: which queries (and demonstrations) an in-context run draws."""
    renamed(parser, "--n-per-domain", parser.add_argument(
        "--n-per-env", type=int_at_least(1), default=DEFAULTS.n_per_env,
        help=f"query images per domain (environment) ({DEFAULTS.n_per_env})"))
    parser.add_argument("--seed", type=int_at_least(0), default=DEFAULTS.seed,
                        help=f"seed of the queries and demonstrations ({DEFAULTS.seed})")


def _add_defined_labels(icl_sub: SubParsers) -> None:
    dl = icl_sub.add_parser(
        "defined-labels",
        help="accuracy when only the demonstrations define the answer words (alpha, beta, ...), "
        "with demonstrations of each domain and with none",
        epilog=example("robustvlm icl defined-labels --model tiny:llava --data data/domains/shapes --query-domain photo "
                       "--out runs/defined_shapes"),
    )
    dl.add_argument("--model", required=True, help="a local model folder, hub name or zoo:NAME")
    dl.add_argument("--data", required=True, help="image-folder root ROOT/DOMAIN/CLASS/NNNN.png, item NNNN "
                    "the same scan in every domain (data synth --benchmark fashion-test)")
    dl.add_argument("--out", required=True, help="folder for defined_labels.md / .json and the per-trial rows")
    dl.add_argument("--query-domain", default="clean", help="the domain of the query pictures")
    dl.add_argument("--demo-domains", help="comma-separated demonstration domains (default: every domain)")
    dl.add_argument("--ways", type=int_at_least(2), default=2, help="classes per trial (2-4; chance 1/ways)")
    dl.add_argument("--shots", type=int_at_least(1), default=1, help="demonstrations per class")
    dl.add_argument("--trials", type=int_at_least(1), default=200, help="trials per demonstration domain (200)")
    dl.add_argument("--seed", type=int_at_least(0), default=0, help="seed of the trials (0)")
    dl.add_argument("--resume", action="store_true", help=RESUME_HELP)
    dl.set_defaults(func=_icl_defined_labels)


def add_diagnose(sub: SubParsers) -> None:
    dg = sub.add_parser("diagnose", help="is a failure visual, semantic or a mapping failure?", epilog=example(
        "robustvlm diagnose --model tiny:idefics3 --data data/domains/digits --out runs/diagnose_digits --shots 1 "
        "--n-per-env 4"))
    dg.add_argument("--model", required=True, help="a model folder, hub name, or openai:MODEL with --base-url")
    dg.add_argument("--data", required=True, help="image-folder root ROOT/DOMAIN/CLASS/*.png")
    dg.add_argument("--out", required=True, help="folder for diagnosis.md / .json")
    dg.add_argument("--descriptions", help="YAML {class: description} (default: WordNet glosses)")
    dg.add_argument("--shots", type=int_at_least(0), default=DIAGNOSE_DEFAULTS.most_shots,
                    help=f"demonstrations in each in-context prompt ({DIAGNOSE_DEFAULTS.most_shots})")
    _add_query_options(dg)
    dg.add_argument("--resume", action="store_true", help=RESUME_HELP)
    add_decoding_options(dg, max_new_tokens=DIAGNOSE_DEFAULTS.max_new_tokens)
    add_served_options(dg)
    add_shard_option(dg)
    dg.set_defaults(func=_diagnose)
