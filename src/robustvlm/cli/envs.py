"""`robustvlm envs`: environments inferred from data."""

from __future__ import annotations

import argparse
from pathlib import Path

from robustvlm.cli.options import (
    IMAGE_ROOT_HELP,
    OUTSIDE_ROOT_HELP,
    RESUME_HELP,
    SubParsers,
    example,
    int_at_least,
)


def _envs_infer(args: argparse.Namespace) -> int:
    from robustvlm.model_ref import ModelRef
    from robustvlm.workflows.finetune.envs_infer import infer_environments

    summary = infer_environments(ModelRef.parse(args.model), args.data, args.out, method=args.method, k=args.k,
                                 batch_size=args.batch_size, seed=args.seed, image_root=args.image_root,
                                 allow_outside_root=args.allow_outside_root, resume=args.resume)
    sizes = ", ".join(f"{name} {n}" for name, n in summary["sizes"].items())
    print(f"{summary['records']} training records -> {sizes}; purity against their own environments "
          f"{100 * summary['purity_vs_given']:.1f}%")
    print(f"env map: {Path(args.out) / 'env_map.yaml'} (data.env_map / --env-map)")
    return 0



def add_envs(sub: SubParsers) -> None:
    """envs infer."""
    en = sub.add_parser("envs", help="environments inferred from data (no environment labels needed)",
                        epilog=example("robustvlm envs infer --model runs/erm/final --data data/tasks --method loss-split "
                                       "--out runs/erm_envs"))
    en_sub = en.add_subparsers(required=True)
    ei = en_sub.add_parser("infer", help="split the training records into environments from a reference "
                           "model's losses (EIIL, a loss split, or k-means); writes an env map",
                           epilog=example("robustvlm envs infer --model runs/erm/final --data data/tasks "
                                          "--method loss-split --out runs/erm_envs"))
    ei.add_argument("--model", required=True, help="the reference model (an ERM run's final/, a hub name)")
    ei.add_argument("--data", required=True, help="instruction data (any loader)")
    ei.add_argument("--out", required=True, help="folder for env_map.yaml and the per-record losses")
    ei.add_argument("--method", default="eiil", choices=["eiil", "loss-split", "cluster"],
                    help="EIIL (maximise the reference's IRMv1 penalty), the high-loss records apart, or "
                    "k-means of its hidden states")
    ei.add_argument("--k", type=int_at_least(2), default=2, help="environments (cluster; EIIL and loss-split: 2)")
    ei.add_argument("--batch-size", type=int_at_least(1), default=8, help="records per forward pass (8)")
    ei.add_argument("--seed", type=int_at_least(0), default=0, help="seed of EIIL's and k-means' starts (0)")
    ei.add_argument("--image-root", metavar="DIR", help=IMAGE_ROOT_HELP)
    ei.add_argument("--allow-outside-root", action="store_true", help=OUTSIDE_ROOT_HELP)
    ei.add_argument("--resume", action="store_true", help=RESUME_HELP)
    ei.set_defaults(func=_envs_infer)
