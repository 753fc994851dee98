"""Option types and help texts shared by several commands: integer and number ranges, the
served-model options, the `train` subcommand's shape, --resume and image-root help."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from robustvlm.configs import resolve as config_file

RESUME_HELP = (
    "continue the run that --out holds (its settings must match; finished work is kept); "
    "without it, a folder that holds a run is refused"
)
IMAGE_ROOT_HELP = (
    "folder that relative image paths in record files are taken from "
    "(LLaVA's --image_folder; default: the data file's folder)"
)


def int_at_least(low: int) -> Callable[[str], int]:
    """An argparse type: an integer >= `low`, else an error naming the value and the range."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is out of range: an integer >= {low}")
        return value

    return parse


def _float_where(ok: Callable[[float], bool], allowed: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{value:g} is out of range: {allowed}")
        return value

    return parse


def float_at_least(low: float) -> Callable[[str], float]:
    """An argparse type: a number >= `low`."""
    return _float_where(lambda v: v >= low, f"a number >= {low:g}")


def float_above(low: float) -> Callable[[str], float]:
    """An argparse type: a number > `low`."""
    return _float_where(lambda v: v > low, f"a number > {low:g}")


float_in_unit_interval = _float_where(lambda v: 0 < v <= 1, "a number in (0, 1]")

OUTSIDE_ROOT_HELP = (
    "accept image paths in data files that resolve outside the data root or --image-root "
    "(absolute paths, ../, symlinks); by default each is a bad record"
)


def add_served_options(parser: argparse.ArgumentParser) -> None:
    """The options of a served model (`--model openai:MODEL`), shared by every command that
    generates from `--model`."""
    group = parser.add_argument_group("served model (--model openai:MODEL, any OpenAI-compatible server)")
    group.add_argument("--base-url", metavar="URL", help="the server's API root, e.g. http://localhost:8000/v1")
    group.add_argument("--api-key-env", metavar="VAR",
                       help="NAME of the environment variable that holds the API key (never the key itself)")
    group.add_argument("--concurrency", type=int_at_least(1), default=8, metavar="N", help="requests in flight at once (8)")
    group.add_argument("--request-timeout", type=float_above(0.0), default=60.0, metavar="S",
                       help="seconds per request (60)")
    group.add_argument("--max-retries", type=int_at_least(0), default=5, metavar="N",
                       help="retries of a request on 429, 5xx and timeouts, with exponential backoff (5)")
    group.add_argument("--no-cache", action="store_true",
                       help="send every request (default: answers are reused from the response cache in "
                       "$ROBUSTVLM_CACHE, else ~/.cache/robustvlm)")


def served(args: argparse.Namespace):
    """The ServedConfig of the served-model options, or None without --base-url."""
    from robustvlm.config import ServedConfig, validate_config

    if args.base_url is None:
        return None
    return validate_config({
        "base_url": args.base_url, "api_key_env": args.api_key_env, "max_concurrency": args.concurrency,
        "timeout_s": args.request_timeout, "max_retries": args.max_retries, "cache": not args.no_cache,
    }, "served-model options", ServedConfig)


def add_train_parser(sub, help_text: str, example: str, func, config_help: str | None = None) -> None:
    """A `train` subcommand: CONFIG, key=value overrides, --out, --resume."""
    parser = sub.add_parser("train", help=help_text)
    parser.add_argument("config", type=config_file, help=config_help)
    parser.add_argument("overrides", nargs="*", help=f"key=value overrides, e.g. {example}")
    parser.add_argument("--out", help="run directory (default runs/<config name>)")
    parser.add_argument("--resume", action="store_true", help=RESUME_HELP + " (from the last checkpoint)")
    parser.set_defaults(func=func)
