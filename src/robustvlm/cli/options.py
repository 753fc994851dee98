"""Option types and help texts shared by several commands: the parser class every command uses
(redacted errors, examples kept as written, old option spellings accepted with a warning),
integer and number ranges, the served-model options, the `train` subcommand's shape, --resume
and image-root help."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from robustvlm.configs import resolve as config_file
from robustvlm.redact import redact

if TYPE_CHECKING:
    from robustvlm.config import ServedConfig


class SubParsers(Protocol):
    """What `ArgumentParser.add_subparsers` returns, as each command group adds its parsers to it."""

    def add_parser(self, name: str, *, help: str | None = ..., description: str | None = ...,
                   epilog: str | None = ..., formatter_class: type[argparse.HelpFormatter] = ...
                   ) -> argparse.ArgumentParser: ...


class Parser(argparse.ArgumentParser):
    """The parser of `robustvlm` and of each of its subcommands (argparse makes subcommands' parsers
    of their parent's class): errors pass through `redact` (a key pasted into any option is never
    echoed), the epilog's example lines are printed as written, and an option's former spelling
    (`renamed`) is accepted for one release with a one-line warning."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)
        self.old_spellings: dict[str, str] = {}

    def parse_known_args(  # type: ignore[override]  # one signature for argparse's overloads
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> Any:
        words = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args([self._current(w) for w in words], namespace)

    def _current(self, word: str) -> str:
        """`word` with a former option spelling replaced by the current one (warning once per use)."""
        name, equals, value = word.partition("=")
        if name not in self.old_spellings:
            return word
        print(f"warning: {name} is deprecated and will be removed in the next release; use "
              f"{self.old_spellings[name]}", file=sys.stderr)
        return self.old_spellings[name] + equals + value

    def error(self, message: str) -> NoReturn:
        if message.startswith("the following arguments are required: config") and self.get_default("config_example"):
            message = no_config_message([], self.get_default("config_example"))
        super().error(redact(message))


def no_config_message(words: list[str], config_example: str | None) -> str:
    """The error of a command line that names no config file (`words`: the positional words it has)."""
    message = ("no config file given (every other word is a key=value override)" if words else
               "no config given: name a YAML file or a packaged config (`robustvlm configs list` lists them)")
    return message + (f"; for example: {config_example}" if config_example else "")


def renamed(parser: argparse.ArgumentParser, old: str, action: argparse.Action) -> None:
    """Accept `old`, the former spelling of `action`'s option, until the next release: it is read
    as the current spelling after a one-line warning, and the help names it."""
    if not isinstance(parser, Parser):
        raise TypeError("renamed() needs a robustvlm.cli.options.Parser")
    parser.old_spellings[old] = action.option_strings[0]
    action.help = f"{action.help} (formerly {old}, still accepted until the next release)"


def example(*lines: str) -> str:
    """A command's help epilog: the example command lines, each run by
    tests/test_documented_commands.py."""
    return "example" + ("s" if len(lines) > 1 else "") + ":\n" + "\n".join(f"  {line}" for line in lines)


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


def add_data_root(parser: argparse.ArgumentParser) -> None:
    """`--data-root DIR`: the folder of Fashion-MNIST's IDX files (main() puts it into
    $ROBUSTVLM_FASHION_MNIST, so worker processes read the same folder)."""
    parser.add_argument(
        "--data-root", metavar="DIR", type=Path,
        help="folder holding Fashion-MNIST's four IDX files (.gz or not), e.g. from `robustvlm data fetch "
        "fashion-mnist --to DIR`; default $ROBUSTVLM_FASHION_MNIST, else the fetched copy, else Debian's "
        "/usr/share/datasets/fashion-mnist")


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


CONFIG_HELP = "a YAML config: a file, or the name of a packaged one (`robustvlm configs list`)"


def add_train_parser(sub: SubParsers, help_text: str, override: str, func: Callable[[argparse.Namespace], int], *,
                     run_example: str, config_help: str = CONFIG_HELP) -> None:
    """A `train` subcommand: CONFIG, key=value overrides (`override` is the help's example of
    one), --out, --resume; `run_example` is the command line its help shows (and the error of a
    line without a config)."""
    parser = sub.add_parser("train", help=help_text, epilog=example(run_example))
    parser.add_argument("config", type=config_file, help=config_help)
    parser.add_argument("overrides", nargs="*", help=f"key=value overrides, e.g. {override}")
    parser.add_argument("--out", help="run directory (default runs/<config name>)")
    parser.add_argument("--resume", action="store_true", help=RESUME_HELP + " (from the last checkpoint)")
    parser.set_defaults(func=func, config_example=run_example)
