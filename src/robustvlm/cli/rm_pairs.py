"""The preference-data options the `rm` commands that read pairs share, and reading those pairs."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from robustvlm.cli.options import IMAGE_ROOT_HELP, OUTSIDE_ROOT_HELP

if TYPE_CHECKING:
    from robustvlm.data.records import SkipLog


def pair_options(args: argparse.Namespace) -> dict:
    """The preference-reading options every `rm` command that reads pairs shares."""
    return {"fmt": args.format, "split": args.split, "image_root": args.image_root,
            "allow_outside_root": args.allow_outside_root, "env_column": args.env_column,
            "aspect": args.aspect}


def read_pairs_for(args: argparse.Namespace, skipped: SkipLog | None = None) -> tuple[list, dict]:
    """The pairs of --data and the options they were read with (stored with a run's settings);
    with a SkipLog `skipped`, bad records are counted there instead of stopping the command."""
    from robustvlm.data.preferences import load_pairs

    options = {**pair_options(args), "split": None}
    on_bad = "skip" if skipped is not None else "error"
    pairs = load_pairs(args.data, verbose=False, on_bad_record=on_bad, skip_log=skipped, **options).pairs
    return pairs, {"path": args.data, **{k: v for k, v in options.items() if k != "split"}}


def add_pair_options(parser: argparse.ArgumentParser) -> None:
    from robustvlm.data.preference_layouts import PREFERENCE_FORMATS

    parser.add_argument("--format", default="auto", help=f"preference layout: {' | '.join(PREFERENCE_FORMATS)} "
                        "(auto recognises it from the columns and says which)")
    parser.add_argument("--split", help="keep only this split (train | val | test); for hf: the split loaded")
    parser.add_argument("--image-root", metavar="DIR", help=IMAGE_ROOT_HELP + "; COCO's folder for POVID")
    parser.add_argument("--allow-outside-root", action="store_true", help=OUTSIDE_ROOT_HELP)
    parser.add_argument("--env-column", help="record field that names the environment (default env)")
    parser.add_argument("--aspect", default="mean", help="VLFeedback rating pairs are formed by: an aspect "
                        "(Helpfulness, 'Visual Faithfulness', 'Ethical Considerations') or mean")
