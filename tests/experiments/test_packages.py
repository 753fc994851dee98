"""Each experiment is one package (issue 50.2): `robustvlm.experiments.NAME` holds its plan,
presets and `Experiment` (`experiment.py`), its run and what only it uses; the registry is built
from those packages; no `workflows/demos` or `workflows/experiments` is left beside them; and a
module named after an experiment lives outside its package only where something outside the
experiments imports it too (a reader that `figures.write` shares, a command's own module)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from module_imports import imported_modules, module_name

import robustvlm
from robustvlm.experiments import EXPERIMENTS, PACKAGES

SOURCE = Path(robustvlm.__file__).parent
ROOT = SOURCE.parent


def experiment_packages() -> list[str]:
    """The subpackages of robustvlm/experiments/, by folder name."""
    return sorted(p.name for p in (SOURCE / "experiments").iterdir() if (p / "__init__.py").is_file())


def all_imports() -> dict[str, set[str]]:
    """{module: the modules it imports} for every module of robustvlm."""
    return {module_name(f, ROOT): imported_modules(f.read_text(encoding="utf-8"), module_name(f, ROOT))
            for f in sorted(SOURCE.rglob("*.py"))}


def named_after(module: str, experiments: list[str]) -> bool:
    """Whether `module`'s last name is an experiment's, alone or as a prefix ("ladder_results")."""
    last = module.rsplit(".", 1)[-1]
    return any(re.fullmatch(rf"{re.escape(name)}(_\w+)?", last) for name in experiments)


def misplaced(imports: Mapping[str, set[str]], experiments: list[str]) -> list[str]:
    """Modules (or packages) outside robustvlm.experiments named after an experiment that no other
    module outside robustvlm.experiments imports: they belong in the experiment's package."""
    def within(name: str, package: str) -> bool:
        return name == package or name.startswith(package + ".")

    outside = {m: names for m, names in imports.items() if not within(m, "robustvlm.experiments")}

    def shared(module: str) -> bool:
        return any(not within(importer, module) and any(within(name, module) for name in names)
                   for importer, names in outside.items())

    return sorted(m for m in outside if named_after(m, experiments) and not shared(m))


def test_the_registry_is_built_from_the_packages():
    assert experiment_packages() == sorted(PACKAGES)
    assert list(EXPERIMENTS) == list(PACKAGES)
    for name in PACKAGES:
        module = __import__(f"robustvlm.experiments.{name}.experiment", fromlist=["EXPERIMENT"])
        assert EXPERIMENTS[name] is module.EXPERIMENT, f"robustvlm.experiments.{name} declares another experiment"


def test_the_demos_and_experiments_of_workflows_are_gone():
    assert not (SOURCE / "workflows" / "demos").exists()
    assert not (SOURCE / "workflows" / "experiments").exists()


def test_a_module_named_after_an_experiment_is_shared_or_lives_in_its_package():
    assert misplaced(all_imports(), list(EXPERIMENTS)) == []


def test_the_check_catches_a_module_only_an_experiment_uses():
    imports = {
        "robustvlm.analysis.ladder_extra": set(),  # read by the ladder only
        "robustvlm.experiments.ladder.readings": set(),  # read by figures.write too
        "robustvlm.figures": {"robustvlm.experiments.ladder.readings"},
        "robustvlm.experiments.ladder.run": {"robustvlm.analysis.ladder_extra", "robustvlm.experiments.ladder.readings"},
        "robustvlm.analysis.stats": set(),  # named after no experiment
    }
    assert misplaced(imports, ["ladder"]) == ["robustvlm.analysis.ladder_extra"]
