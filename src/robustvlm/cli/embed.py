"""`robustvlm embed`: VLMs as embedding models (VLM2Vec), contrastive training and evaluation."""

from __future__ import annotations

import argparse
from pathlib import Path

from robustvlm.cli.merge import add_shard_option
from robustvlm.cli.options import (
    OUTSIDE_ROOT_HELP,
    RESUME_HELP,
    SubParsers,
    add_train_parser,
    example,
    int_at_least,
    renamed,
)


def _embed_train(args: argparse.Namespace) -> int:
    from robustvlm.config import EmbedRunConfig, load_config
    from robustvlm.workflows.embed.train import embed_train

    cfg = load_config(args.config, args.overrides, EmbedRunConfig)
    result = embed_train(cfg, args.out or Path("runs") / Path(args.config).stem, resume=args.resume)
    print(f"final embedding model ({result.family}): {Path(result.final_dir).resolve()}")
    return 0


def _embed_eval(args: argparse.Namespace) -> int:
    from robustvlm.model_ref import ModelRef
    from robustvlm.workflows.embed.evaluate import embed_eval
    from robustvlm.workflows.mc_eval import ModelSpec

    models = [ModelSpec(ModelRef.parse(m), args.family) for m in args.model]
    result = embed_eval(
        models, args.out, benches=args.benchmark or (), retrieval=args.retrieval,
        retrieval_split=args.retrieval_split, resume=args.resume, batch_size=args.batch_size,
        allow_outside_root=args.allow_outside_root,
    )
    for path in (result.results_csv, result.retrieval_csv):
        if path is not None:
            print(f"{path}:\n{Path(path).read_text()}")
    return 0


def add_embed(sub: SubParsers) -> None:
    """embed train, embed eval."""
    emb = sub.add_parser("embed", help="VLMs as embedding models (VLM2Vec): contrastive training, evaluation",
                         epilog=example("robustvlm embed train configs/paper/vlm2vec_vqa.yaml --out runs/vlm2vec_vqa"))
    emb_sub = emb.add_subparsers(required=True)
    add_train_parser(
        emb_sub, "contrastive (InfoNCE) training of a VLM into an embedding model", "embed.chunk_size=8",
        _embed_train, config_help="YAML: model, data, embed, train sections",
        run_example="robustvlm embed train configs/paper/vlm2vec_vqa.yaml --out runs/vlm2vec_vqa",
    )
    ee = emb_sub.add_parser(
        "eval", help="embedding models as zero-shot classifiers (results.csv) and image-text retrievers (recall@1/5)",
        epilog=example("robustvlm embed eval --model tiny:idefics3 --family vlm2vec-mixed --benchmark q/digits.jsonl "
                       "--out runs/embed_eval"),
    )
    ee.add_argument("--model", action="append", required=True,
                    help="a folder from embed train (family read from its embedding.json) or a hub name; repeatable")
    ee.add_argument("--family", choices=["vlm2vec-vqa", "vlm2vec-caption", "vlm2vec-mixed"],
                    help="the family of every --model (needed for models without embedding.json)")
    renamed(ee, "--bench", ee.add_argument("--benchmark", action="append",
                                           help="questions JSONL from mc build; repeatable"))
    ee.add_argument("--retrieval", help="dataset of image-text records (any loader) for recall@1/5")
    ee.add_argument("--retrieval-split", default="test", help="which records of --retrieval to use")
    ee.add_argument("--out", required=True, help="folder for results.csv and the retrieval scores")
    ee.add_argument("--batch-size", type=int_at_least(1), default=16, help="images or texts per forward pass (16)")
    ee.add_argument("--resume", action="store_true", help=RESUME_HELP + "; models and benchmarks may be added")
    ee.add_argument("--allow-outside-root", action="store_true", help=OUTSIDE_ROOT_HELP)
    add_shard_option(ee)
    ee.set_defaults(func=_embed_eval)
