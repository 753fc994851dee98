"""Shared check for the bad-input suite (tests/bad_input): a command fed one kind of bad input
must stop with one clear error (one `error:` line, and the indented lines under it that list a
config's problems one per line), exit code 1 or 2, no traceback, and leave every file of an
earlier run as it was.

Commands run in process through `robustvlm.cli.main` (a subprocess per case would spend seconds
importing torch and transformers each time); argparse's own errors arrive as SystemExit(2).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path


def snapshot(folder: Path | None) -> dict[str, str]:
    """{relative path: sha256} of every file below `folder` ({} when it is None or absent)."""
    if folder is None or not folder.exists():
        return {}
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def run_cli(argv: Sequence[str]) -> int:
    """Exit code of `robustvlm ARGV` run in this process."""
    from robustvlm.cli import main

    try:
        return main(list(argv))
    except SystemExit as exit_:  # argparse errors and --help
        return int(exit_.code or 0)


def expect_clean_failure(
    argv: Sequence[str],
    capsys,
    *,
    mentions: Iterable[str] = (),
    untouched: Path | None = None,
) -> str:
    """Run `robustvlm ARGV`; assert a clean failure (see module doc) and return the error text.

    Args:
        argv: the command line without the program name.
        capsys: pytest's capsys fixture (reads what the command printed).
        mentions: strings the error line must contain (a file, record, key or value).
        untouched: a folder of an earlier run whose files must not change.
    """
    before = snapshot(untouched)
    code = run_cli(argv)
    _, err = capsys.readouterr()
    assert code in (1, 2), f"exit code {code}, stderr:\n{err}"
    assert "Traceback" not in err, err
    lines = err.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("error:") or ": error:" in line]
    assert len(starts) == 1, f"expected one error, got:\n{err}"
    # One error: its line, plus the indented lines that list a config's several problems.
    block = [lines[starts[0]]]
    block += [line for line in lines[starts[0] + 1 :] if line.startswith((" ", "\t"))]
    line = "\n".join(block)
    for needle in mentions:
        assert needle in line, f"{needle!r} not in error {line!r}"
    assert snapshot(untouched) == before, "a file of the earlier run changed"
    return line
