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

import datetime
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from robustvlm.errors import ConfigError

TIMINGS = Path(__file__).with_name("timings.yaml")


@dataclass(frozen=True)
class Measurement:
    """One timed run: `wall_s` and `cpu_s` (user + system) in seconds (one may be None: a profile
    measures CPU time only, an old log wall time only), `load` the load average (`os.getloadavg()[0]`) seen
    while it ran, a number or a range as text ("11-14"; None: not recorded), `machine` in words."""

    wall_s: float | None
    cpu_s: float | None
    machine: str
    load: float | str | None
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
    """Seconds as a reader writes them: below 59.5 in seconds as recorded (decimals kept), else in
    minutes and seconds, else in hours and minutes (rounded to the second)."""
    if seconds < 59.5:
        return f"{seconds:g} s"
    total = round(seconds)
    minutes, secs = divmod(total, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def _cpu(seconds: float) -> str:
    """"579 CPU-s"; under 100 s as recorded ("7.55 CPU-s")."""
    return f"{seconds:g} CPU-s" if seconds < 100 else f"{round(seconds):,} CPU-s"


def read_timings(path: Path | None = None) -> dict[str, Timing]:
    """{key: Timing} of the recorded file (default `TIMINGS`; ConfigError naming the file and entry
    when one is malformed)."""
    return _read(path or TIMINGS)


#: the fields of an entry, and of each of its measurements (`Measurement`'s, in the file's words)
ENTRY_FIELDS = {"command", "runs", "pending"}
RUN_FIELDS = {"wall_s", "cpu_s", "machine", "load", "date", "commit", "source"}


def _seconds(where: str, name: str, value: Any, optional: bool = False) -> float | None:
    """`value` as positive seconds (or a load: not negative); ConfigError naming `where` and `name`."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (value == 0 and name != "load"):
        what = "a number or a range (\"11-14\")" if name == "load" else "a positive number"
        raise ConfigError(f"{where}: field {name!r} must be {what}, not {value!r}")
    return float(value)


def _text(where: str, name: str, value: Any) -> str:
    """`value` as a non-empty string (a date YAML read as a date is written back ISO)."""
    if isinstance(value, (int, float, datetime.date)) and not isinstance(value, bool):
        value = value.isoformat() if isinstance(value, datetime.date) else str(value)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: field {name!r} must be non-empty text, not {value!r}")
    return value


def _measurement(where: str, record: Any) -> Measurement:
    """One measurement of the file, validated: every field of `RUN_FIELDS`, no other."""
    if not isinstance(record, dict):
        raise ConfigError(f"{where}: a measurement must be a mapping of {', '.join(sorted(RUN_FIELDS))}, not {record!r}")
    unknown, missing = set(map(str, record)) - RUN_FIELDS, RUN_FIELDS - set(map(str, record))
    if unknown or missing:
        raise ConfigError(f"{where}: " + "; ".join(
            ([f"unknown field(s) {', '.join(map(repr, sorted(unknown)))}"] if unknown else [])
            + ([f"missing field(s) {', '.join(map(repr, sorted(missing)))}"] if missing else []))
            + f" (a measurement has exactly {', '.join(sorted(RUN_FIELDS))})")
    wall = _seconds(where, "wall_s", record["wall_s"], optional=True)
    cpu = _seconds(where, "cpu_s", record["cpu_s"], optional=True)
    if wall is None and cpu is None:
        raise ConfigError(f"{where}: fields 'wall_s' and 'cpu_s' are both empty (a measurement has one at least)")
    load = record["load"]
    if not (load is None or (isinstance(load, str) and re.fullmatch(r"\d+(\.\d+)?-\d+(\.\d+)?", load))):
        load = _seconds(where, "load", load)
    return Measurement(wall_s=wall, cpu_s=cpu, machine=_text(where, "machine", record["machine"]), load=load,
                       date=_text(where, "date", record["date"]), commit=_text(where, "commit", record["commit"]),
                       source=_text(where, "source", record["source"]))


@lru_cache(maxsize=4)
def _read(path: Path) -> dict[str, Timing]:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: must map each key to an entry (command, runs), not {type(raw).__name__}")
    timings = {}
    for key, entry in raw.items():
        where = f"{path}: entry {key!r}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: must be a mapping of {', '.join(sorted(ENTRY_FIELDS))}, not {entry!r}")
        if unknown := set(map(str, entry)) - ENTRY_FIELDS:
            raise ConfigError(f"{where}: unknown field(s) {', '.join(map(repr, sorted(unknown)))} "
                              f"(an entry has {', '.join(sorted(ENTRY_FIELDS))})")
        runs = entry.get("runs") or []
        if not isinstance(runs, list):
            raise ConfigError(f"{where}: field 'runs' must be a list of measurements, not {runs!r}")
        pending = entry.get("pending")
        timings[key] = Timing(str(key), _text(where, "command", entry.get("command")),
                              tuple(_measurement(f"{where}, run {i + 1}", r) for i, r in enumerate(runs)),
                              None if pending is None else _text(where, "pending", pending))
        if not runs and not pending:
            raise ConfigError(f"{where}: has no measurement and says nothing of who measures it (pending)")
    return timings


def timing(key: str) -> Timing:
    """The recorded timing `key` (ConfigError naming the known keys when there is none)."""
    timings = read_timings()
    if key not in timings:
        raise ConfigError(f"no recorded timing {key!r} in {TIMINGS}; recorded: {', '.join(timings)}")
    return timings[key]


def _walls(t: Timing) -> str | None:
    walls = sorted(r.wall_s for r in t.runs if r.wall_s is not None)
    if not walls:
        return None
    return duration(walls[0]) if len(walls) == 1 else f"{duration(walls[0])} to {duration(walls[-1])}"


def _cpus(t: Timing) -> str | None:
    cpus = sorted(r.cpu_s for r in t.runs if r.cpu_s is not None)
    if not cpus:
        return None
    return _cpu(cpus[0]) if _cpu(cpus[0]) == _cpu(cpus[-1]) else f"{_cpu(cpus[0])[:-6]} to {_cpu(cpus[-1])}"


def short(key: str) -> str:
    """A time for a help text: the CPU seconds (their range over the measurements), then the
    measured range of wall time; "not measured yet" for a pending entry."""
    t = timing(key)
    if not t.runs:
        return "not measured yet"
    return ", ".join(part for part in (_cpus(t), _walls(t) and f"{_walls(t)} wall") if part)


def phrase(key: str) -> str:
    """A time for a page: `short` and each measurement's machine, load, date and commit."""
    t = timing(key)
    if not t.runs:
        return f"not measured yet ({t.pending})"
    each = "; ".join(
        ", ".join(part for part in (r.wall_s and duration(r.wall_s), r.cpu_s and _cpu(r.cpu_s)) if part)
        + f" on {r.machine}" + (f" at load {r.load:g}" if isinstance(r.load, float) else f" at load {r.load}" if r.load else "")
        + f", {r.date}, commit {r.commit}" for r in t.runs)
    return f"{short(key)}; measured: {each}"


def as_record(measurement: Measurement) -> dict[str, Any]:
    """A measurement as the YAML file holds it."""
    return {"wall_s": measurement.wall_s, "cpu_s": measurement.cpu_s, "machine": measurement.machine,
            "load": measurement.load, "date": measurement.date, "commit": measurement.commit,
            "source": measurement.source}
