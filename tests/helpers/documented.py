"""The command lines the documentation prints (README.md, BENCHMARKS.md, docs/) and the examples of
every command's help, read by the tests that check them (tests/test_documented_commands.py,
tests/test_gitignore.py)."""

from __future__ import annotations

import re
from pathlib import Path

from cli_tree import all_commands, examples

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").rglob("*.md"))]


def documented_commands() -> list[str]:
    """Command lines of the fenced code blocks (continuation lines joined, comments dropped)."""
    found: list[str] = []
    for path in DOCS:
        for block in re.findall(r"```[a-z]*\n(.*?)```", path.read_text(encoding="utf-8"), re.S):
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                line = re.sub(r"\s+#.*$", "", line.strip())
                if line.startswith(("robustvlm ", "make ", "python benchmarks/", "python -m robustvlm")) and line not in found:
                    found.append(line)
    helps = [line for parser in all_commands().values() for line in examples(parser)]  # groups' helps too
    return found + [line for line in dict.fromkeys(helps) if line not in found]
