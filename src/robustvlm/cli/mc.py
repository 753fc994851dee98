"""`robustvlm mc`: multiple-choice benchmarks with hard distractors."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from robustvlm.cli.merge import add_shard_option
from robustvlm.cli.options import (
    BLIND_HELP,
    IMAGE_ROOT_HELP,
    OUTSIDE_ROOT_HELP,
    OVERWRITE_HELP,
    RESUME_HELP,
    SubParsers,
    add_decoding_options,
    add_served_options,
    example,
    int_at_least,
    renamed,
    served,
)
from robustvlm.cli.output_checks import output_file
from robustvlm.errors import ConfigError
from robustvlm.extras import require
from robustvlm.model_ref import ModelRef


def _mc_build(args: argparse.Namespace) -> int:
    from robustvlm.workflows.measure.mc_build import (
        BlindFilter,
        build_benchmark,
        filter_report_path,
    )

    if args.filter_blind is None:
        given = [o for o, on in (("--filter-method", args.filter_method != "loglik"),
                                 ("--base-url", args.base_url is not None)) if on]
        if given:
            raise ConfigError(f"{' and '.join(given)} apply to the blind filter only: add --filter-blind MODEL, "
                              "or leave them out")
    if args.distractors == "wordnet":
        require("wordnet", "mc build --distractors wordnet")
    if args.distractors == "text" and not args.text_encoder:
        require("metrics", "mc build --distractors text with the default --text-encoder")

    questions = build_benchmark(
        args.data,
        args.out,
        distractors=args.distractors,
        vision_model=ModelRef.parse(args.vision_model) if args.vision_model else None,
        text_encoder=args.text_encoder,
        image_root=args.image_root,
        allow_outside_root=args.allow_outside_root,
        overwrite=args.overwrite,
        envs=args.envs,
        k=args.k,
        n=args.n,
        seed=args.seed,
        class_subset=args.class_subset,
        class_names=args.class_names,
        prompt=args.prompt,
        circular=args.circular,
        link_images=args.link_images,
        filter_blind=BlindFilter(ModelRef.parse(args.filter_blind), args.filter_method, served(args), args.filter_batch_size)
        if args.filter_blind else None,
    )
    if args.filter_blind:
        report = json.loads(filter_report_path(args.out).read_text(encoding="utf-8"))
        print(f"dropped {report['dropped']} of {report['questions']} questions that {args.filter_blind} answers "
              f"blind in every rotation ({report['blind_input']}); report: {filter_report_path(args.out).resolve()}")
    print(f"wrote {len(questions)} questions to {Path(args.out).resolve()}")
    return 0


def _mc_eval(args: argparse.Namespace) -> int:
    from robustvlm.report.vision_gain import gain_summary
    from robustvlm.workflows.mc_eval import evaluate_models
    from robustvlm.workflows.measure.mc_paired import check_baseline, write_mc_report

    models = [ModelRef.parse(m) for m in args.model]
    baseline = ModelRef.parse(args.baseline) if args.baseline is not None else None
    check_baseline(baseline, models)
    csv_path = evaluate_models(
        models,
        args.benchmark,
        args.out,
        method=args.method,
        circular=args.circular,
        resume=args.resume,
        batch_size=args.batch_size,
        normalize=not args.sum,
        max_new_tokens=args.max_new_tokens,
        repetition_penalty=args.repetition_penalty,
        served=served(args),
        image_root=args.image_root,
        allow_outside_root=args.allow_outside_root,
        blind=args.blind,
    )
    print(Path(csv_path).read_text())
    if args.blind:
        print(gain_summary(Path(csv_path).parent))
    paths = write_mc_report(args.out, models, args.benchmark, circular=args.circular, baseline=baseline)
    print("wrote " + ", ".join(str(p.resolve()) for p in paths))
    return 0


def _mc_stability(args: argparse.Namespace) -> int:
    from robustvlm.report.tables import markdown_table
    from robustvlm.workflows.mc_eval import stability_rows

    rows = stability_rows(args.predictions, draws=args.draws, seed=args.seed)
    cells = [[str(r["size"])] + [f"{r[k]:.4f}" for k in ("mean", "std", "lo", "hi")] for r in rows]
    print(markdown_table(["questions", "mean", "std", "lo", "hi"], cells))
    return 0


def add_mc(sub: SubParsers) -> None:
    """mc build, mc eval, mc stability."""
    mc = sub.add_parser("mc", help="multiple-choice benchmarks with hard distractors",
                        epilog=example("robustvlm data synth --benchmark domains --out data/domains",
                                       "robustvlm mc build --data data/domains/digits --out q/digits.jsonl --k 3 --n 40"))
    mc_sub = mc.add_subparsers(required=True)
    _add_build(mc_sub)
    _add_eval(mc_sub)
    ms = mc_sub.add_parser("stability", help="accuracy against the number of sampled questions",
                           epilog=example("robustvlm mc stability runs/mc_paired/tiny_siglip/clean.jsonl"))
    ms.add_argument("predictions", help="per-question JSONL written by mc eval")
    ms.add_argument("--draws", type=int_at_least(1), default=50, help="random subsets drawn per size (50)")
    ms.add_argument("--seed", type=int_at_least(0), default=0, help="seed of the draws (0)")
    ms.set_defaults(func=_mc_stability)


def _add_build(mc_sub: Any) -> None:
    mb = mc_sub.add_parser("build", help="turn labelled images into K-way questions", epilog=example(
        "robustvlm mc build --data data/domains/digits --out q/digits.jsonl --k 3 --n 40"))
    mb.add_argument(
        "--data", required=True, help="labelled images (any loader; e.g. ROOT/DOMAIN/CLASS)"
    )
    mb.add_argument("--out", required=True, type=output_file, help="questions JSONL")
    mb.add_argument("--env", action="append", metavar="NAME", dest="envs",
                    help="keep this environment (domain) of --data only; repeat for several "
                    "(default: all of them)")
    mb.add_argument("--k", type=int_at_least(2), default=5, help="options per question, the answer included (5)")
    mb.add_argument(
        "--distractors",
        default="random",
        choices=["random", "wordnet", "text", "visual"],
        help="how wrong options are chosen: random classes; nearest in the WordNet tree; nearest "
        "class-name sentence embeddings; or visual: classes whose mean image embedding under "
        "--vision-model is nearest",
    )
    mb.add_argument(
        "--vision-model",
        help="for --distractors visual: a CLIP/SigLIP model or a VLM (its vision tower is "
        "used) as hub name, local folder or tiny:clip / tiny:siglip / tiny:idefics3",
    )
    mb.add_argument(
        "--text-encoder",
        help="for --distractors text: a sentence encoder (local folder or already-cached hub "
        "name; default the offline all-MiniLM-L6-v2)",
    )
    mb.add_argument("--n", type=int_at_least(1), default=None, help="number of questions (stratified by class)")
    mb.add_argument("--seed", type=int_at_least(0), default=0, help="seed of the sampled images and distractors (0)")
    mb.add_argument(
        "--class-subset", help="class list or {dataset_class: reference_class} mapping file"
    )
    mb.add_argument("--class-names", help="file mapping class keys (e.g. WordNet ids) to names")
    mb.add_argument("--prompt", type=int_at_least(0), default=0, help="prompt formulation 0-4")
    mb.add_argument("--circular", action="store_true", help="add every rotation of the options")
    mb.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP % "questions file")
    mb.add_argument("--image-root", metavar="DIR", help=IMAGE_ROOT_HELP)
    mb.add_argument("--allow-outside-root", action="store_true", help=OUTSIDE_ROOT_HELP)
    mb.add_argument("--link-images", action="store_true",
                    help="write image paths instead of embedding the images (mc eval then needs --image-root)")
    _add_filter_blind(mb)
    mb.set_defaults(func=_mc_build)


def _add_filter_blind(mb: argparse.ArgumentParser) -> None:
    group = mb.add_argument_group("blind filter (MMStar-style: drop questions answerable without the image)")
    group.add_argument("--filter-blind", metavar="MODEL",
                       help="drop every question this model, given no image, answers right in every rotation "
                       "of its options; the count goes to OUT_STEM.blind_filter.json (openai:MODEL with --base-url)")
    group.add_argument("--filter-method", default="loglik", choices=["loglik", "generate"],
                       help="how a generative --filter-blind model scores (as mc eval --method)")
    group.add_argument("--filter-batch-size", type=int_at_least(1), default=8, help="questions per scoring call")
    add_served_options(mb)


def _add_eval(mc_sub: Any) -> None:
    me = mc_sub.add_parser("eval", help="score models on question files; results.csv with CIs", epilog=example(
        "robustvlm mc eval --model tiny:clip --model tiny:siglip --benchmark q/clean.jsonl --benchmark "
        "q/rotated.jsonl --out runs/mc_paired --baseline tiny:clip"))
    me.add_argument("--model", action="append", required=True,
                    help="repeat for several models; openai:MODEL is a served model (--base-url)")
    renamed(me, "--bench", me.add_argument("--benchmark", action="append", required=True,
                                           help="questions JSONL from mc build; repeatable"))
    me.add_argument("--out", required=True, help="folder for results.csv, per-question JSONL and the report")
    me.add_argument(
        "--method",
        default="loglik",
        choices=["loglik", "generate"],
        help="option log-likelihood (shared prefix) or generation + answer extraction",
    )
    me.add_argument(
        "--circular", action="store_true", help="count a question only if every rotation is right"
    )
    me.add_argument(
        "--sum",
        action="store_true",
        help="rank options by summed, not length-normalised, log-likelihood",
    )
    me.add_argument("--batch-size", type=int_at_least(1), default=8, help="questions per scoring batch (8)")
    me.add_argument("--image-root", metavar="DIR",
                    help="a folder the benchmarks' image paths may point into, besides each benchmark's own folder")
    me.add_argument("--allow-outside-root", action="store_true",
                    help="accept benchmark image paths anywhere (only for benchmarks you trust)")
    me.add_argument("--resume", action="store_true", help=RESUME_HELP + "; models and benchmarks may be added")
    me.add_argument("--baseline", metavar="MODEL", help="the --model the others are compared with, question by "
                    "question, in report.html and results.json (default: the first)")
    add_decoding_options(me, max_new_tokens=16)  # `multiple_choice.generative.GENERATE_MAX_NEW_TOKENS`
    add_served_options(me)
    me.add_argument("--blind", action="store_true", help=BLIND_HELP)
    add_shard_option(me)
    me.set_defaults(func=_mc_eval)
