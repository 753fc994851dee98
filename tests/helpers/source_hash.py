"""A hash of a robustvlm module's source and of every robustvlm module it imports, directly or
not (imports inside functions included): what the tests' cross-session caches are keyed by, so
that a change to any code a cached artefact came from rebuilds it."""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def module_file(name: str) -> Path | None:
    """The source file of robustvlm module `name` (a package's __init__.py), or None."""
    base = SRC.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def imported_modules(path: Path, name: str) -> set[str]:
    """The robustvlm modules `path` (module `name`) imports, as written and as parent packages."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {m for m in found if m.split(".")[0] == "robustvlm"}


def dependency_files(name: str) -> list[Path]:
    """The source files of module `name` and of everything in robustvlm it imports, transitively."""
    seen: dict[str, Path] = {}
    todo = [name]
    while todo:
        current = todo.pop()
        path = module_file(current)
        if current in seen or path is None:
            continue
        seen[current] = path
        todo.extend(imported_modules(path, current))
        todo.extend(".".join(current.split(".")[:i]) for i in range(1, current.count(".") + 1))
    return sorted(set(seen.values()))


def source_hash(name: str) -> str:
    """16 hex digits of SHA-256 over the paths and contents of `dependency_files(name)`."""
    digest = hashlib.sha256()
    for path in dependency_files(name):
        digest.update(path.relative_to(SRC).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]
