"""`robustvlm configs`: the recipes that ship with the package, listed and copied out to edit."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from robustvlm.cli.output_checks import folder_to_copy_into

if TYPE_CHECKING:
    from robustvlm.cli.options import SubParsers
from robustvlm.cli.options import example


def _list(args: argparse.Namespace) -> int:
    from robustvlm.configs import recipe_names

    for name in recipe_names():
        print(name)
    return 0


def _copy(args: argparse.Namespace) -> int:
    from robustvlm.configs import copy_recipe

    print(f"wrote {copy_recipe(args.name, args.folder).resolve()}")
    return 0


def add_configs(sub: SubParsers) -> None:
    """configs list, configs copy."""
    configs = sub.add_parser(
        "configs", help="the built-in configs: list them, copy one out to edit (any config argument "
        "also takes a built-in name)",
        epilog=example("robustvlm configs list", "robustvlm configs copy erm_tasks my_configs"))
    configs_sub = configs.add_subparsers(required=True)
    configs_sub.add_parser("list", help="print every built-in config's name",
                           epilog=example("robustvlm configs list")).set_defaults(func=_list)
    copy = configs_sub.add_parser("copy", help="copy a built-in config into a folder (never overwrites)",
                                  epilog=example("robustvlm configs copy erm_tasks my_configs"))
    copy.add_argument("name", help="a name `configs list` prints (e.g. erm_tasks, reward/standard)")
    copy.add_argument("folder", type=folder_to_copy_into, help="folder to copy into (created), keeping the config's subfolder")
    copy.set_defaults(func=_copy)
