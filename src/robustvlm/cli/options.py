"""Option types and help texts shared by several commands: integer and number ranges, the
served-model options, the `train` subcommand's shape, --resume and image-root help."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from robustvlm.configs import resolve as config_file

if TYPE_CHECKING:
    from robustvlm.config import ServedConfig


class SubParsers(Protocol):
    """What `ArgumentParser.add_subparsers` returns, as each command group adds its parsers to it."""

    def add_parser(self, name: str, *, help: str | None = ..., description: str | None = ...,
                   formatter_class: type[argparse.HelpFormatter] = ...) -> argparse.ArgumentParser: ...


RESUME_HELP = (
    "continue the run that --out holds (its settings must match; finished work is kept); "
    "without it, a folder that holds a run is refused"
)
OVERWRITE_HELP = "replace what --out already holds (without it, an existing %s is refused)"
BLIND_HELP = (
    "also score the model with the image removed (a text-only prompt; a blank image of the same size for "
    "families that need one) into OUT/blind/ and write the vision gain, with-image minus blind, per "
    "environment with a paired 95%% interval: OUT/vision_gain.csv and vision_gain.html"
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
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
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
    group.add_argument("--concurrency", type=concurrency, default=8, metavar="N|auto",
                       help="requests in flight at once (8); auto: learnt from the replies, growing while they are "
                       "fast and error-free, shrinking on 429 and timeouts (docs/guides/concurrency.md)")
    group.add_argument("--max-concurrency", type=int_at_least(1), metavar="N",
                       help=f"with --concurrency auto: at most N requests in flight ({AUTO_CEILING})")
    group.add_argument("--request-timeout", type=float_above(0.0), default=60.0, metavar="S",
                       help="seconds per request (60)")
    group.add_argument("--max-retries", type=int_at_least(0), default=5, metavar="N",
                       help="retries of a request on 429, 5xx and timeouts, with exponential backoff (5)")
    group.add_argument("--max-reply-bytes", type=int_at_least(1024), metavar="B",
                       help="largest reply read, in bytes; a larger one fails its record (1048576 = 1 MiB)")
    group.add_argument("--no-cache", action="store_true",
                       help="send every request (default: answers are reused from the response cache in "
                       "$ROBUSTVLM_CACHE, else ~/.cache/robustvlm)")


AUTO = "auto"
AUTO_CEILING = 64


def concurrency(text: str) -> int | str:
    """An argparse type: "auto" or an integer >= 1."""
    if text == AUTO:
        return AUTO
    try:
        return int_at_least(1)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither an integer >= 1 nor 'auto'") from None


def add_decoding_options(parser: argparse.ArgumentParser, *, max_new_tokens: int) -> None:
    """The decoding options of a command that generates (greedy, the same for a local and a
    served model): --max-new-tokens and --repetition-penalty (1.0, none, by default)."""
    group = parser.add_argument_group("decoding (greedy; the same for a local and a served model)")
    group.add_argument("--max-new-tokens", type=int_at_least(1), default=max_new_tokens, metavar="N",
                       help=f"longest answer, in tokens ({max_new_tokens})")
    group.add_argument("--repetition-penalty", type=float_above(0.0), default=1.0, metavar="P",
                       help="repetition penalty (1.0: none, the default); a served model is sent it as vLLM's "
                       "`repetition_penalty` field, and a server that refuses it stops the run")


def served(args: argparse.Namespace) -> ServedConfig | None:
    """The ServedConfig of the served-model options, or None without --base-url."""
    from robustvlm.config import ServedConfig, validate_config
    from robustvlm.errors import ConfigError

    if args.base_url is None:
        return None
    adaptive = args.concurrency == AUTO
    if args.max_concurrency is not None and not adaptive:
        raise ConfigError("--max-concurrency is the ceiling of --concurrency auto; with a fixed --concurrency N, "
                          "N requests are in flight")
    return validate_config({
        "base_url": args.base_url, "api_key_env": args.api_key_env, "adaptive_concurrency": adaptive,
        "max_concurrency": (args.max_concurrency or AUTO_CEILING) if adaptive else args.concurrency,
        "timeout_s": args.request_timeout, "max_retries": args.max_retries, "cache": not args.no_cache,
        **({"max_reply_bytes": args.max_reply_bytes} if args.max_reply_bytes is not None else {}),
    }, "served-model options", ServedConfig)


def add_train_parser(sub: SubParsers, help_text: str, example: str, func: Callable[[argparse.Namespace], int],
                     config_help: str | None = None) -> None:
    """A `train` subcommand: CONFIG, key=value overrides, --out, --resume."""
    parser = sub.add_parser("train", help=help_text)
    parser.add_argument("config", type=config_file, help=config_help)
    parser.add_argument("overrides", nargs="*", help=f"key=value overrides, e.g. {example}")
    parser.add_argument("--out", help="run directory (default runs/<config name>)")
    parser.add_argument("--resume", action="store_true", help=RESUME_HELP + " (from the last checkpoint)")
    parser.set_defaults(func=func)
