"""Import layers, read from the source with `ast` (imports inside functions count too):
evaluation and multiple_choice do not import each other, and config/ imports no evaluation."""

from __future__ import annotations

from pathlib import Path

import pytest
from module_imports import imported_modules

import robustvlm

PACKAGE = Path(robustvlm.__file__).parent


def violations(importer: str, forbidden: str) -> list[str]:
    """"file: module" for each import of `forbidden` (a dotted package) by a module of `importer`
    (a dotted package or module)."""
    root = PACKAGE.parent / importer.replace(".", "/")
    files = sorted(root.rglob("*.py")) if root.is_dir() else [root.with_suffix(".py")]
    found = []
    for f in files:
        module = ".".join(f.relative_to(PACKAGE.parent).with_suffix("").parts)
        found += [f"{module}: {name}" for name in sorted(imported_modules(f.read_text(encoding="utf-8"), module))
                  if name == forbidden or name.startswith(forbidden + ".")]
    return found


def test_the_walk_sees_every_kind_of_import():
    source = "import robustvlm.a\nfrom robustvlm.b import c\ndef f():\n    from . import d\n    from ..e import g\n"
    assert imported_modules(source, "robustvlm.pkg.mod") == {
        "robustvlm.a", "robustvlm.b", "robustvlm.b.c", "robustvlm.pkg", "robustvlm.pkg.d", "robustvlm.e",
        "robustvlm.e.g",
    }
    assert violations("robustvlm.multiple_choice", "robustvlm.data") != []  # real files are read


#: robustvlm's layers, bottom first. A module may import its own package and any lower layer;
#: packages that share a layer are independent of one another.
LAYERS = [
    {"errors"},
    {"configs", "extras", "redact", "plugins", "model_ref", "hub_dataset", "machine", "timings", "plan_fields"},
    {"config", "runs", "analysis"},
    {"data", "sharding"},
    {"models"},
    {"objectives"},
    {"training", "linear"},
    {"evaluation", "multiple_choice", "reward", "embeddings"},
    {"report"},
    {"workflows"},
    {"experiments"},  # one package per demo (`robustvlm demo NAME`)
    {"figures"},  # the figure writer, gathering every experiment's figures
    {"cli"},
    {"__main__"},  # `python -m robustvlm`
]
LAYER_OF = {name: i for i, names in enumerate(LAYERS) for name in names}


def top_package(module: str) -> str:
    """"data" for robustvlm.data.loaders, "cli" for robustvlm.cli."""
    return module.split(".")[1]


def upward_imports() -> list[str]:
    """"module -> imported" for every import that runs up the layers or across a layer."""
    found = []
    for f in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(f.relative_to(PACKAGE.parent).with_suffix("").parts)
        if module.count(".") < 1:
            continue  # robustvlm/__init__.py
        own = top_package(module)
        for name in imported_modules(f.read_text(encoding="utf-8"), module):
            if not name.startswith("robustvlm.") or top_package(name) == own:
                continue
            if LAYER_OF[top_package(name)] >= LAYER_OF[own]:
                found.append(f"{module} -> {name}")
    return found


def test_every_package_has_a_layer():
    packages = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
                if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    assert packages <= set(LAYER_OF), f"no layer for {sorted(packages - set(LAYER_OF))}"


def test_no_import_runs_back_up_the_layers():
    assert upward_imports() == []


#: The groups of `workflows/`, bottom first, as the layers above: a group imports the shared
#: modules (`workflows/*.py`) and lower groups only; groups that share a layer are independent.
WORKFLOW_LAYERS = [
    {"launchers", "merge"},
    {"plan_configs", "grid_config", "mc_eval", "run_plan"},
    {"finetune", "embed", "zoo", "eval_grid"},
    {"reward", "measure"},
]
WORKFLOW_LAYER_OF = {name: i for i, names in enumerate(WORKFLOW_LAYERS) for name in names}
#: Known edges that still run up, each with the issue that removes it (none today).
ALLOWED_WORKFLOW_EDGES: set[tuple[str, str]] = set()


def workflow_group(module: str) -> str:
    """"finetune" for robustvlm.workflows.finetune.sweep, "launchers" for robustvlm.workflows.launchers."""
    return module.split(".")[2]


def upward_workflow_imports() -> list[str]:
    """"module -> imported" for every import inside `workflows/` that runs up or across its groups."""
    found = []
    for f in sorted((PACKAGE / "workflows").rglob("*.py")):
        module = ".".join(f.relative_to(PACKAGE.parent).with_suffix("").parts)
        if module.count(".") < 2:
            continue  # robustvlm/workflows/__init__.py
        own = workflow_group(module)
        for name in imported_modules(f.read_text(encoding="utf-8"), module):
            if not name.startswith("robustvlm.workflows.") or workflow_group(name) == own:
                continue
            other = workflow_group(name)
            if (WORKFLOW_LAYER_OF[other] >= WORKFLOW_LAYER_OF[own]
                    and (module, other) not in ALLOWED_WORKFLOW_EDGES):
                found.append(f"{module} -> {name}")
    return found


def test_every_workflow_group_has_a_layer():
    groups = {p.stem if p.is_file() else p.name for p in (PACKAGE / "workflows").iterdir()
              if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    assert groups == set(WORKFLOW_LAYER_OF), f"layers of groups {sorted(groups ^ set(WORKFLOW_LAYER_OF))}"


def test_no_import_runs_back_up_the_workflow_groups():
    assert upward_workflow_imports() == []


def test_the_group_check_catches_an_upward_import(monkeypatch):
    monkeypatch.setitem(WORKFLOW_LAYER_OF, "reward", 0)  # as if reward sat at the bottom
    assert "robustvlm.workflows.reward.train -> robustvlm.workflows.finetune.train" in upward_workflow_imports()


@pytest.mark.parametrize(("importer", "forbidden"), [
    ("robustvlm.evaluation", "robustvlm.multiple_choice"),
    ("robustvlm.multiple_choice", "robustvlm.evaluation"),
    ("robustvlm.config", "robustvlm.evaluation"),
    ("robustvlm.reward", "robustvlm.evaluation"),
    ("robustvlm.reward", "robustvlm.multiple_choice"),
])
def test_named_pairs_stay_apart(importer, forbidden):
    assert violations(importer, forbidden) == []
