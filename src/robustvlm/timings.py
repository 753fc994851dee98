"""How long the documented commands take, as measured (issue 56.2): one place, `timings.yaml`
beside this module, that every time the README, the docs and the help texts state is read from.

Each entry is a documented command (`make demo`, the tour's `train`, `demo tasks --quick`, ...)
with its measurements: wall seconds, CPU seconds (user + system), the machine, the load average
seen while it ran, the date and the commit, and where the figure comes from (`source`).
`tools/time_command.py` runs a command under `/usr/bin/time -v` and appends a measurement; an entry
with no measurement yet is pending (`pending` says who fills it). A page states a time inside a
`<!-- time:KEY -->...<!-- /time -->` block that `tools/docs_reference.py` writes from `phrase`
(tests/test_timings.py checks every time a page or help text states); a help text calls `short`.
Where the figure depends on load (several measurements, or a machine shared with other jobs),
the CPU time comes first and the wall time is given as the measured range.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from robustvlm.errors import ConfigError

TIMINGS = Path(__file__).with_name("timings.yaml")


@dataclass(frozen=True)
class Measurement:
    """One timed run: `wall_s` and `cpu_s` (user + system) in seconds, `load` the 1-minute load
    average seen while it ran (None: not recorded), `machine` in words."""

    wall_s: float
    cpu_s: float | None
    machine: str
    load: float | None
    date: str
    commit: str
    source: str


@dataclass(frozen=True)
class Timing:
    """A documented command and its measurements (none: `pending` says who measures it)."""

    key: str
    command: str
    runs: tuple[Measurement, ...]
    pending: str | None = None


def duration(seconds: float) -> str:
    """Seconds as a reader writes them: in seconds, else in minutes and seconds, else in hours and
    minutes (rounded to the second)."""
    total = round(seconds)
    if total < 60:
        return f"{total} s"
    minutes, secs = divmod(total, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def _cpu(seconds: float) -> str:
    return f"{round(seconds):,} CPU-s"


def read_timings(path: Path | None = None) -> dict[str, Timing]:
    """{key: Timing} of the recorded file (default `TIMINGS`; ConfigError naming the file and entry
    when one is malformed)."""
    return _read(path or TIMINGS)


@lru_cache(maxsize=4)
def _read(path: Path) -> dict[str, Timing]:
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    timings = {}
    for key, entry in raw.items():
        try:
            runs = tuple(Measurement(wall_s=float(r["wall_s"]), cpu_s=None if r.get("cpu_s") is None else float(r["cpu_s"]),
                                     machine=str(r["machine"]), load=None if r.get("load") is None else float(r["load"]),
                                     date=str(r["date"]), commit=str(r["commit"]), source=str(r["source"]))
                         for r in entry.get("runs") or [])
            timings[key] = Timing(key, str(entry["command"]), runs, entry.get("pending"))
        except (KeyError, TypeError, ValueError) as err:
            raise ConfigError(f"{path}: entry {key!r}: {err!r} (see robustvlm.timings)") from None
        if not runs and not timings[key].pending:
            raise ConfigError(f"{path}: entry {key!r} has no measurement and says nothing of who measures it (pending)")
    return timings


def timing(key: str) -> Timing:
    """The recorded timing `key` (ConfigError naming the known keys when there is none)."""
    timings = read_timings()
    if key not in timings:
        raise ConfigError(f"no recorded timing {key!r} in {TIMINGS}; recorded: {', '.join(timings)}")
    return timings[key]


def _walls(t: Timing) -> str:
    walls = sorted(r.wall_s for r in t.runs)
    return duration(walls[0]) if len(walls) == 1 else f"{duration(walls[0])} to {duration(walls[-1])}"


def _cpus(t: Timing) -> str | None:
    cpus = sorted(r.cpu_s for r in t.runs if r.cpu_s is not None)
    if not cpus:
        return None
    return _cpu(cpus[0]) if round(cpus[0]) == round(cpus[-1]) else f"{round(cpus[0]):,} to {_cpu(cpus[-1])}"


def short(key: str) -> str:
    """A time for a help text: the CPU seconds (their range over the measurements), then the
    measured range of wall time; "not measured yet" for a pending entry."""
    t = timing(key)
    if not t.runs:
        return "not measured yet"
    cpu = _cpus(t)
    return (f"{cpu}, " if cpu else "") + f"{_walls(t)} wall"


def phrase(key: str) -> str:
    """A time for a page: `short` and each measurement's machine, load, date and commit."""
    t = timing(key)
    if not t.runs:
        return f"not measured yet ({t.pending})"
    each = "; ".join(
        f"{duration(r.wall_s)}" + (f", {_cpu(r.cpu_s)}" if r.cpu_s is not None else "") + f" on {r.machine}"
        + (f" at load {r.load:g}" if r.load is not None else "") + f", {r.date}, commit {r.commit}"
        for r in t.runs)
    return f"{short(key)}; measured: {each}"


def as_record(measurement: Measurement) -> dict[str, Any]:
    """A measurement as the YAML file holds it."""
    return {"wall_s": measurement.wall_s, "cpu_s": measurement.cpu_s, "machine": measurement.machine,
            "load": measurement.load, "date": measurement.date, "commit": measurement.commit,
            "source": measurement.source}
