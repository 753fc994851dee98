"""The line under a figure's table that says which code measured it (`report.figure_sources`).

Four kinds, one line each, in italics so the rendered page shows them:

- measured: `_Measured at commit C; code hash H._` (written by `make figures`);
- checked unaffected: `_Measured at commit C; code hash H, checked unaffected at commit S: HOW._`
  (the code changed, the figure was not re-measured, and HOW says what showed it did not move);
- not re-verified: `_Code hash H taken at commit S; not re-verified since commit C, which
  measured it._` (the hash recorded after the fact, without a re-measurement);
- pending: `_Not measured yet: `make figures E` writes this figure._` under an empty block (the
  runs it needs cannot be made yet, e.g. a model still being built; E its experiment).

H is `figure_sources.sources_hash` of the figure when the line was written.

Under a stamp of a measured figure, one more line says what machine measured it:
`_Machine: M._`, M the `machine.machine_line` of the record its results.json holds, or "not
recorded" for results written before runs recorded it (blocks written before then have no
machine line and read as not recorded).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

from robustvlm.errors import ConfigError

_HASH = r"(?P<hash>[0-9a-f]{12})"
_COMMIT = r"[0-9a-f]{7,40}(?: with uncommitted changes)?"
_PATTERNS = {
    "measured": re.compile(rf"_Measured at commit (?P<commit>{_COMMIT}); code hash {_HASH}\._"),
    "checked": re.compile(rf"_Measured at commit (?P<commit>{_COMMIT}); code hash {_HASH}, checked unaffected "
                          rf"at commit (?P<at>{_COMMIT}): (?P<how>.+)\._"),
    "not-reverified": re.compile(rf"_Code hash {_HASH} taken at commit (?P<at>{_COMMIT}); not re-verified since "
                                 rf"commit (?P<commit>{_COMMIT}), which measured it\._"),
    "pending": re.compile(r"_Not measured yet: `make figures (?P<how>[\w-]+)` writes this figure\._"),
}
_MACHINE = re.compile(r"_Machine: (?P<machine>.+)\._")
NOT_RECORDED = "not recorded"


@dataclass(frozen=True)
class Stamp:
    """Which code measured a figure: `commit` measured it; `code_hash` is the hash its stamp
    records; `kind` (measured, checked, not-reverified, pending); `at` the commit the hash was
    taken at when it was not taken at measurement, `how` the check that showed the figure
    unaffected (for a pending figure: the experiment that will measure it); `machine` the one
    line saying what machine measured it ("" when not recorded)."""

    kind: str
    commit: str = ""
    code_hash: str = ""
    at: str = ""
    how: str = ""
    machine: str = ""

    def lines(self) -> str:
        """The stamp line and, under a measured figure's, its machine line (module doc)."""
        if self.kind == "pending":
            return self.line()
        return f"{self.line()}\n_Machine: {self.machine or NOT_RECORDED}._"

    def line(self) -> str:
        """The stamp as its one line (module doc)."""
        if self.kind == "measured":
            return f"_Measured at commit {self.commit}; code hash {self.code_hash}._"
        if self.kind == "pending":
            return f"_Not measured yet: `make figures {self.how}` writes this figure._"
        if self.kind == "checked":
            return (f"_Measured at commit {self.commit}; code hash {self.code_hash}, checked unaffected at "
                    f"commit {self.at}: {self.how.rstrip('.')}._")
        return (f"_Code hash {self.code_hash} taken at commit {self.at}; not re-verified since commit "
                f"{self.commit}, which measured it._")


def parse_stamp(line: str) -> Stamp | None:
    """The stamp a line holds, or None when it is not a stamp line."""
    for kind, pattern in _PATTERNS.items():
        match = pattern.fullmatch(line.strip())
        if match:
            found = match.groupdict()
            return Stamp(kind, found.get("commit") or "", found.get("hash") or "", found.get("at") or "",
                         found.get("how") or "")
    return None


def parse_machine(line: str) -> str | None:
    """The machine a machine line names ("" for "not recorded"), or None when it is not one."""
    match = _MACHINE.fullmatch(line.strip())
    if match is None:
        return None
    return "" if match["machine"] == NOT_RECORDED else match["machine"]


def current_commit() -> str:
    """The checkout's short commit, "with uncommitted changes" appended when src/ differs from it;
    ConfigError outside a git checkout (a figure's commit cannot be told there)."""
    try:
        commit = _git("rev-parse", "--short=7", "HEAD")
        dirty = _git("status", "--porcelain", "--", "src")
    except (OSError, subprocess.CalledProcessError) as err:
        raise ConfigError(f"cannot tell the commit that measures this figure (git: {err})") from err
    return f"{commit} with uncommitted changes" if dirty else commit


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip()
