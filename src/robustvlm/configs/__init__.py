"""Configs that ship with the package: the demo's, reference figures, and the recipes the
documentation runs (`recipes/`, the repository's `configs/` folder, packaged into the wheel).

Every one of them is a built-in config that `configs list` names and `configs copy` copies out: a
recipe's name is its path under `configs/` without `.yaml` (`erm_tasks`, `reward/standard`), and
the package's own configs beside `recipes/` (`demo`, `demo_zoo`, `task_signal`,
`reference/domainbed_coloredmnist`: the files the help texts name as `configs/demo.yaml`, ...) are
named the same way, from this folder;
`resolve` turns a config argument into a file: an existing path as given, else a recipe named
by its name or by its documented path (`configs/erm_tasks.yaml`), so the documentation's command
lines work for a user who installed the wheel and has no `configs/` folder. A renamed recipe
(`RENAMED`) still answers to its old name, with a deprecation message, for one release.
"""

from __future__ import annotations

import sys
from pathlib import Path

from robustvlm.errors import ConfigError

PACKAGE = Path(__file__).resolve().parent
RECIPES = PACKAGE / "recipes"
#: the package's own configs outside `recipes/`: the demos', task-signal's, the reference figures'.
OWN = ("*.yaml", "reference/*.yaml")
#: old recipe name -> its new name (the sweep configs were named `study_*`).
RENAMED = {"study_spurious": "sweep_spurious", "study_digits": "sweep_digits"}


def _built_in() -> dict[str, Path]:
    """{name: file} of every built-in config: the recipes, then the package's own (`OWN`)."""
    found = {p.relative_to(RECIPES).with_suffix("").as_posix(): p for p in RECIPES.rglob("*.yaml")}
    for pattern in OWN:
        found |= {p.relative_to(PACKAGE).with_suffix("").as_posix(): p for p in PACKAGE.glob(pattern)}
    return found


def recipe_names() -> list[str]:
    """Every built-in config's name, sorted (`demo`, `paper/dynamic_birm_smolvlm`, ...)."""
    return sorted(_built_in())


def _recipe(name: str) -> Path | None:
    """The packaged file of recipe `name`, given as a name or as `configs/NAME.yaml`; None if none."""
    text = name.removeprefix("configs/").removesuffix(".yaml").removesuffix(".yml")
    if text in RENAMED:
        print(f"deprecated: the built-in config {text!r} is now called {RENAMED[text]!r}; the old name "
              "works until the next release", file=sys.stderr)
        text = RENAMED[text]
    return _built_in().get(text)


def resolve(argument: str) -> str:
    """A config argument as a path: the file when it exists, else the packaged recipe it names,
    else unchanged (the command then reports the missing file)."""
    if Path(argument).exists():
        return argument
    recipe = _recipe(argument)
    return str(recipe) if recipe is not None else argument


def name_of(source: Path) -> str:
    """A built-in config file's name (`reward/standard`): its path under `recipes/` or the package."""
    base = RECIPES if source.is_relative_to(RECIPES) else PACKAGE
    return source.relative_to(base).with_suffix("").as_posix()


def copy_recipe(name: str, folder: str | Path) -> Path:
    """Copy recipe `name` into `folder` (created), keeping its subfolder; returns the new file.
    An existing file is never overwritten."""
    source = _recipe(name)
    if source is None:
        raise ConfigError(f"no built-in config {name!r}: `robustvlm configs list` names them")
    target = Path(folder) / f"{name_of(source)}.yaml"
    if target.is_symlink():
        raise ConfigError(f"{target.absolute()} is a symbolic link: a copy would be written where it points; "
                          "copy into another folder or remove the link first")
    if target.exists():
        raise ConfigError(f"{target.resolve()} exists: copy into another folder or remove it first")
    target.parent.mkdir(parents=True, exist_ok=True)
    handle = target.open("xb")  # exclusive: never through a link made meanwhile, never over a file
    try:
        with handle:
            handle.write(source.read_bytes())
    except OSError:
        target.unlink()  # a full disk leaves no half copy that a rerun would refuse
        raise
    return target
