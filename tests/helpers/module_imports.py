"""The imports of robustvlm's modules, read from the source with `ast` (imports inside functions
count too): the import layers (tests/test_layers.py) and the experiment packages
(tests/experiments/test_packages.py) are checked on them."""

from __future__ import annotations

import ast
from pathlib import Path


def imported_modules(source: str, module: str) -> set[str]:
    """Every module `source` imports, as dotted names (`from a import b` gives "a" and "a.b");
    `module`, the source's own dotted name, resolves relative imports."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = module.split(".")[: -node.level] if node.level else []
            base = ".".join([*parts, node.module] if node.module else parts)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def module_name(path: Path, root: Path) -> str:
    """The dotted name of the module at `path` below `root`, the folder holding the package
    ("robustvlm.cli" for robustvlm/cli/__init__.py)."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
