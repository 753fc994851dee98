"""Times that hold (issue 56.2): every time README.md, BENCHMARKS.md, docs/ and the help texts state
comes from the recorded measurements (src/robustvlm/timings.yaml, `robustvlm.timings`), never typed
by hand.

A page states a time in a `<!-- time:KEY -->...<!-- /time -->` block, which must be what
`robustvlm.timings.phrase(KEY)` gives now (`python tools/docs_reference.py` rewrites them); a
help text states one through `robustvlm.timings.short`. Every other time statement (`TIME`) is
refused, but for the limits and settings named in `LIMITS`. A table's cell may hold a
`<!-- time:KEY:short -->` block (`short`), the text around it naming the machine. The recorded file
is read back, each formatted figure is checked against its measurements, and every recorded
measurement is stated somewhere.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from cli_tree import all_commands

from robustvlm.errors import ConfigError
from robustvlm.timings import TIMINGS, Measurement, duration, read_timings, short

ROOT = Path(__file__).resolve().parents[1]
PAGES = (ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").rglob("*.md")))
#: a stated duration: a number (or a range) and a unit of time, or a duration in words
TIME = re.compile(
    r"(?<![\w.])(?:\d[\d,]*(?:\.\d+)?\s*(?:-|to|–)\s*)?\d[\d,]*(?:\.\d+)?\s+"
    r"(?:h|hours?|min|minutes?|s|seconds?|CPU-(?:s|seconds?|minutes?|hours?))(?![\w-])"
    r"|\ba minute\b|\bseconds to minutes\b|\bseconds each\b|\bin a minute\b"
    r"|(?<![\w.])\d[\d.,]*-(?:second|minute|hour)\b"  # "a 2-minute budget"
    r"|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|fifteen|twenty|thirty)-(?:second|minute|hour)\b"
    r"|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|fifteen|twenty|thirty|a few|several)\s+"
    r"(?:seconds?|minutes?|hours?|CPU-(?:seconds?|minutes?|hours?))\b")
#: the blocks whose text is generated: recorded times, and the measured figures (`robustvlm.figures`)
GENERATED = re.compile(r"<!-- (time|figure):([\w:-]+) -->.*?<!-- /(?:time|figure)(?::[\w:-]+)? -->", re.S)
#: {page: the durations it states that are limits or settings, not how long something took}
LIMITS = {
    "docs/contributing.md": ["120 s", "5 s"],  # pytest-timeout's limit; the size that marks a test slow
    "docs/getting-started-demo.md": ["10 minutes", "10 minutes"],  # what the demo was sized for
    # the device time a lent GPU gives a task, and gpu_check's budgets on it and dry (BUDGET_S)
    "docs/gpu-check.md": ["15 minutes", "8 minutes", "3-minute", "180 s"],
    "docs/guides/served-models.md": ["60 s"],  # --request-timeout's default
    "docs/guides/model-zoo.md": ["60 minutes", "60-minute"],  # the full zoo's build goal on 2 idle cores
    # the zoo-ii figures target's CPU goal; the full and the quick zoo build's goals
    "docs/results/zoo-ii.md": ["15 CPU-minutes", "60-minute", "3 minutes", "60 minutes", "3 minutes"],
    "docs/results/zoo-iii.md": ["30 CPU-minutes", "30 CPU-minutes"],  # the member's build goal
    "BENCHMARKS.md": ["30 s"],  # bench-real's load sampling interval (/proc/loadavg)
    "docs/results/ladder.md": ["30-minute"],  # the demo's time budget
}
#: the pages a newcomer reads first: each states the times the issue found wrong from the record
FRONT_DOOR = {"README.md": {"make-demo", "make-test", "make-test-fast"}, "docs/index.md": {"make-demo"},
              "docs/getting-started.md": {"make-test", "make-test-fast", "demo-quick", "demo-tasks-quick", "tour-train"},
              "docs/getting-started-demo.md": {"make-demo", "demo-quick"},
              "docs/contributing.md": {"make-test", "make-test-fast"}}


def _docs_reference():
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "tools" / "docs_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def typed_times(text: str) -> list[str]:
    """The time statements of `text` outside its generated blocks."""
    return [m.group(0) for m in TIME.finditer(GENERATED.sub("", text))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_time_a_page_states_is_recorded(page):
    name = str(page.relative_to(ROOT))
    text = page.read_text(encoding="utf-8")
    assert _docs_reference().with_times(text) == text, f"{name}: run `python tools/docs_reference.py`"
    if name == "docs/reference/cli.md":  # the help texts, generated: their times are `short`'s
        text = re.sub(r"\s+", " ", text)
        for key in read_timings():
            text = text.replace(short(key), "")
    found = typed_times(text)
    for limit in LIMITS.get(name, []):
        found.remove(limit)
    assert not found, f"{name} types times by hand: {found}; record them (tools/time_command.py) and use a time block"


def test_every_recorded_measurement_is_stated_on_a_page_or_in_a_help_text():
    stated = set()
    for page in PAGES:
        stated |= {m.group(1) for m in re.finditer(r"<!-- time:([\w-]+?)(?::short)? -->", page.read_text(encoding="utf-8"))}
    for path in (ROOT / "src").rglob("*.py"):
        stated |= set(re.findall(r"\bshort\(['\"]([\w-]+)['\"]\)", path.read_text(encoding="utf-8")))
    assert set(read_timings()) <= stated, f"recorded but stated nowhere: {sorted(set(read_timings()) - stated)}"


@pytest.mark.parametrize("page", sorted(FRONT_DOOR))
def test_the_front_door_states_the_measured_times(page):
    keys = set(re.findall(r"<!-- time:([\w-]+) -->", (ROOT / page).read_text(encoding="utf-8")))
    assert FRONT_DOOR[page] <= keys


def test_help_texts_state_only_recorded_times():
    recorded = [short(key) for key in read_timings()]
    for name, parser in all_commands().items():
        text = re.sub(r"\s+", " ", parser.format_help())
        for figure in recorded:
            text = text.replace(figure, "")
        assert not TIME.findall(text), f"robustvlm {name} --help types a time: {TIME.findall(text)}"
    assert short("make-demo") in re.sub(r"\s+", " ", all_commands()["demo default"].format_help())


def test_the_recorded_file_reads_back_and_each_figure_is_its_measurements():
    timings = read_timings(TIMINGS)
    assert {"make-demo", "make-test", "make-test-fast", "tour-train", "demo-tasks-quick", "demo-quick"} <= set(timings)
    for t in timings.values():
        for run in t.runs:
            assert (run.wall_s or run.cpu_s) and run.machine and run.date and run.commit and run.source, (t.key, run)
        walls = [duration(w) for w in sorted(r.wall_s for r in t.runs if r.wall_s)]
        assert not walls or short(t.key).endswith(f"{walls[0]} wall" if len(walls) == 1 else f"{walls[0]} to {walls[-1]} wall")
        assert t.runs or t.pending, t.key


def test_the_figures_are_computed_from_the_measurements(tmp_path, monkeypatch):
    from robustvlm import timings as module

    path = tmp_path / "timings.yaml"
    path.write_text(
        "job:\n  command: make job\n  runs:\n"
        "  - {wall_s: 308, cpu_s: 579.4, machine: 2 idle cores, load: 0.5, date: '2026-11-26', commit: abc1234, source: x}\n"
        "  - {wall_s: 1309, cpu_s: 694, machine: 2 busy cores, load: 9, date: '2026-11-28', commit: def5678, source: y}\n"
        "later:\n  command: make later\n  pending: the lead measures it\n")
    monkeypatch.setattr(module, "TIMINGS", path)
    assert duration(308) == "5 min 8 s" and duration(59.6) == "1 min" and duration(3720) == "1 h 2 min"
    assert duration(5.21) == "5.21 s" and duration(12.0) == "12 s"
    assert module.short("job") == "579 to 694 CPU-s, 5 min 8 s to 21 min 49 s wall"
    assert module.phrase("job").endswith("5 min 8 s, 579 CPU-s on 2 idle cores at load 0.5, 2026-11-26, commit abc1234; "
                                         "21 min 49 s, 694 CPU-s on 2 busy cores at load 9, 2026-11-28, commit def5678")
    assert module.short("later") == "not measured yet"
    assert Measurement(1.0, None, "m", None, "d", "c", "s").cpu_s is None


@pytest.mark.parametrize(("entry", "error"), [
    ("  runs:\n  - {wall_s: 3, cpu_s: 2, machine: m, load: 1, date: d, commit: c, source: s}\n", "'command'"),
    ("  command: x\n  runs:\n  - {wall_s: 3, cpu_s: 2, machine: m, load: 1, date: d, commit: c, source: s,\n"
     "     commit 1261394): null}\n", "run 1: unknown field(s) 'commit 1261394)'"),
    ("  command: x\n  runs:\n  - {wall_s: 3, machine: m, load: 1, date: d, commit: c, source: s}\n", "missing field(s) 'cpu_s'"),
    ("  command: x\n  runs:\n  - {wall_s: -3, cpu_s: 2, machine: m, load: 1, date: d, commit: c, source: s}\n", "'wall_s'"),
    ("  command: x\n  runs:\n  - {wall_s: null, cpu_s: null, machine: m, load: 1, date: d, commit: c, source: s}\n",
     "both empty"),
    ("  command: x\n  runs:\n  - {wall_s: 3, cpu_s: 2, machine: m, load: high, date: d, commit: c, source: s}\n", "'load'"),
    ("  command: x\n  runs:\n  - {wall_s: 3, cpu_s: 2, machine: '', load: 1, date: d, commit: c, source: s}\n", "'machine'"),
    ("  command: x\n  sources: y\n  pending: z\n", "unknown field(s) 'sources'"),
    ("  command: x\n", "pending"),
])
def test_a_malformed_entry_is_refused_naming_its_key_and_field(tmp_path, entry, error):
    path = tmp_path / "timings.yaml"
    path.write_text("job:\n" + entry)
    with pytest.raises(ConfigError, match="entry 'job'") as err:
        read_timings(path)
    assert error in str(err.value) and str(path) in str(err.value)


def test_a_profile_records_cpu_time_only_and_a_load_range(tmp_path, monkeypatch):
    from robustvlm import timings as module

    path = tmp_path / "timings.yaml"
    path.write_text("run:\n  command: a run\n  runs:\n"
                    "  - {wall_s: null, cpu_s: 1.1, machine: idle, load: 0-1, date: d, commit: c, source: cProfile}\n")
    monkeypatch.setattr(module, "TIMINGS", path)
    assert module.short("run") == "1.1 CPU-s"
    assert module.phrase("run") == "1.1 CPU-s; measured: 1.1 CPU-s on idle at load 0-1, d, commit c"


def test_time_command_parses_gnu_times_report():
    spec = importlib.util.spec_from_file_location("time_command", ROOT / "tools" / "time_command.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    report = ("\tUser time (seconds): 120.50\n\tSystem time (seconds): 4.25\n"
              "\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:02:03.5\n")
    assert module.parse_time_v(report) == (3600 + 2 * 60 + 3.5, 124.75)
    assert module.parse_time_v(report.replace("1:02:03.5", "5:08.00")) == (308.0, 124.75)
