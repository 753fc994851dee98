"""Configs that ship with the package: the demo's, reference figures, and the recipes the
documentation runs (`recipes/`, the repository's `configs/` folder, packaged into the wheel).

A recipe's name is its path under `configs/` without `.yaml` (`erm_tasks`, `reward/standard`);
`resolve` turns a config argument into a file: an existing path as given, else a recipe named
by its name or by its documented path (`configs/erm_tasks.yaml`), so the documentation's command
lines work for a user who installed the wheel and has no `configs/` folder. A renamed recipe
(`RENAMED`) still answers to its old name, with a deprecation message, for one release.
"""

from __future__ import annotations

import sys
from pathlib import Path

from robustvlm.errors import ConfigError

RECIPES = Path(__file__).resolve().parent / "recipes"
#: old recipe name -> its new name (the sweep configs were named `study_*`).
RENAMED = {"study_spurious": "sweep_spurious", "study_digits": "sweep_digits"}


def recipe_names() -> list[str]:
    """Every packaged recipe's name, sorted (`paper/dynamic_birm_smolvlm`, ...)."""
    return sorted(p.relative_to(RECIPES).with_suffix("").as_posix() for p in RECIPES.rglob("*.yaml"))


def _recipe(name: str) -> Path | None:
    """The packaged file of recipe `name`, given as a name or as `configs/NAME.yaml`; None if none."""
    text = name.removeprefix("configs/").removesuffix(".yaml").removesuffix(".yml")
    if text in RENAMED:
        print(f"deprecated: the built-in config {text!r} is now called {RENAMED[text]!r}; the old name "
              "works until the next release", file=sys.stderr)
        text = RENAMED[text]
    if text not in recipe_names():
        return None
    return RECIPES / f"{text}.yaml"


def resolve(argument: str) -> str:
    """A config argument as a path: the file when it exists, else the packaged recipe it names,
    else unchanged (the command then reports the missing file)."""
    if Path(argument).exists():
        return argument
    recipe = _recipe(argument)
    return str(recipe) if recipe is not None else argument


def copy_recipe(name: str, folder: str | Path) -> Path:
    """Copy recipe `name` into `folder` (created), keeping its subfolder; returns the new file.
    An existing file is never overwritten."""
    source = _recipe(name)
    if source is None:
        raise ConfigError(f"no built-in config {name!r}: `robustvlm configs list` names them")
    target = Path(folder) / source.relative_to(RECIPES)
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
