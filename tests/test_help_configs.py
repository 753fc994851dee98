"""Every config a help text names can be had (issue 56.4): each `configs/NAME.yaml` that any
command's help mentions is listed by `robustvlm configs list` and copied out by `robustvlm configs
copy NAME FOLDER`, byte for byte the file the command reads."""

from __future__ import annotations

import re

import pytest
from cli_tree import all_commands

from robustvlm.cli import main
from robustvlm.configs import resolve

#: a config path as help texts name them (`configs/demo.yaml`, `configs/paper/shortcut_aware_rm.yaml`)
NAMED = re.compile(r"configs/([\w/.-]+?)\.ya?ml")


def named_configs() -> list[str]:
    """The config names every help text mentions (`demo`, `reward/shortcut_aware`, ...), sorted."""
    found = set()
    for parser in all_commands().values():
        text = re.sub(r"\s+", " ", parser.format_help())  # a path argparse wrapped is whole again
        found |= {m.group(1) for m in NAMED.finditer(text)}
    return sorted(found)


def test_the_help_texts_name_configs_and_the_demos_own_among_them():
    names = named_configs()
    assert {"demo", "demo_zoo", "task_signal", "erm_tasks"} <= set(names), names


@pytest.mark.parametrize("name", named_configs())
def test_every_config_a_help_names_is_listed_and_copies(name, tmp_path, capsys):
    assert main(["configs", "list"]) == 0
    assert name in capsys.readouterr().out.split()
    assert main(["configs", "copy", f"configs/{name}.yaml", str(tmp_path / "mine")]) == 0
    copied = tmp_path / "mine" / f"{name}.yaml"
    assert f"wrote {copied.resolve()}" in capsys.readouterr().out
    assert copied.read_bytes() == open(resolve(f"configs/{name}.yaml"), "rb").read()
