"""Code-health limits on the package: no function in src/ longer than MAX_LINES lines.

A function's length runs from its `def` line to its last line, docstring and comments included
(nested functions count within the function that holds them, and on their own).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_LINES = 60


def function_lengths(tree: ast.Module) -> dict[str, int]:
    """{qualified name: lines from `def` to the last line} of every function in a module."""
    lengths: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                assert child.end_lineno is not None
                lengths[name] = child.end_lineno - child.lineno + 1
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return lengths


def package_lengths() -> dict[str, int]:
    """{"path:qualified name": length} of every function under src/."""
    return {
        f"{path.relative_to(SRC).as_posix()}:{name}": length
        for path in sorted(SRC.rglob("*.py"))
        for name, length in function_lengths(ast.parse(path.read_text(encoding="utf-8"))).items()
    }


def test_function_lengths_are_measured_from_def_to_last_line():
    tree = ast.parse(
        "class A:\n"
        "    def f(self):\n"
        '        """doc."""\n'
        "        def g():\n"
        "            return 1\n"
        "\n"
        "        return g()\n"
        "\n"
        "async def h():\n"
        "    pass\n"
    )
    assert function_lengths(tree) == {"A.f": 6, "A.f.g": 2, "h": 2}


def test_no_function_in_the_package_is_longer_than_the_limit():
    lengths = package_lengths()
    too_long = {name: n for name, n in lengths.items() if n > MAX_LINES}
    assert not too_long, f"functions longer than {MAX_LINES} lines (split them): {too_long}"

