"""Code-health limits on the package: no function in src/ longer than MAX_LINES lines, and no
module longer than MAX_MODULE_LINES lines (issue 50.5: a longer one is split by its seams).

A function's length runs from its `def` line to its last line, docstring and comments included
(nested functions count within the function that holds them, and on their own).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_LINES = 60
MAX_MODULE_LINES = 500


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



def module_lengths(root: Path = SRC) -> dict[str, int]:
    """{path under `root`: number of lines} of every module under `root` (src/)."""
    return {path.relative_to(root).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
            for path in sorted(root.rglob("*.py"))}


def test_module_lengths_count_every_line(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n\n# comment\n", encoding="utf-8")
    (tmp_path / "pkg" / "b.py").write_text("y = 2", encoding="utf-8")
    assert module_lengths(tmp_path) == {"pkg/a.py": 3, "pkg/b.py": 1}


def test_no_module_in_the_package_is_longer_than_the_limit():
    lengths = module_lengths()
    assert len(lengths) > 100  # the real package is read
    too_long = {path: n for path, n in lengths.items() if n > MAX_MODULE_LINES}
    assert not too_long, f"modules longer than {MAX_MODULE_LINES} lines (split them by their seams): {too_long}"
