"""Time a documented command and record the measurement (issue 56.2): the one way a time gets into
src/robustvlm/timings.yaml, which the README, the docs and the help texts read.

    python tools/time_command.py KEY [--machine TEXT] [--note TEXT] -- COMMAND [ARG ...]

runs COMMAND under `/usr/bin/time -v` from the current folder, samples the 1-minute load average
every 5 s while it runs, and appends to entry KEY (created with COMMAND as its command): wall
seconds, CPU seconds (user + system, children included), the machine (`--machine`, default the
core count and CPU model), the mean load seen, today's date (UTC), the commit (`git describe
--always --dirty` of this checkout) and `--note` as the source. A command that fails records
nothing. Then run `python tools/docs_reference.py` to rewrite the pages' time blocks.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from robustvlm.timings import TIMINGS, Measurement, as_record  # noqa: E402

TIME = "/usr/bin/time"


def machine_line() -> str:
    """"2 cores (Intel(R) Xeon(R) Processor)": the core count and the CPU model."""
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "unknown CPU") if Path("/proc/cpuinfo").is_file() else "unknown CPU"
    return f"{os.cpu_count()} cores ({model})"


def parse_time_v(text: str) -> tuple[float, float]:
    """(wall seconds, user + system seconds) from `/usr/bin/time -v`'s report."""
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", text)
    user = re.search(r"User time \(seconds\): ([\d.]+)", text)
    system = re.search(r"System time \(seconds\): ([\d.]+)", text)
    if not (wall and user and system):
        raise SystemExit(f"error: not a /usr/bin/time -v report:\n{text[-500:]}")
    hours, minutes, seconds = int(wall[1] or 0), int(wall[2]), float(wall[3])
    return 3600 * hours + 60 * minutes + seconds, float(user[1]) + float(system[1])


def run_timed(command: list[str]) -> tuple[float, float, float]:
    """Run `command` under /usr/bin/time -v: (wall s, CPU s, mean 1-minute load average)."""
    loads = [os.getloadavg()[0]]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(5):
            loads.append(os.getloadavg()[0])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        done = subprocess.run([TIME, "-v", "-o", report.name, *command], check=False)
        stop.set()
        sampler.join()
        if done.returncode != 0:
            raise SystemExit(f"error: {' '.join(command)} exited {done.returncode}: nothing recorded")
        wall, cpu = parse_time_v(Path(report.name).read_text())
    return wall, cpu, sum(loads) / len(loads)


def record(key: str, command: str, measurement: Measurement, path: Path = TIMINGS) -> None:
    """Append `measurement` to entry `key` of the timings file (keeping its header comment)."""
    text = path.read_text(encoding="utf-8")
    header = "".join(line + "\n" for line in text.splitlines() if line.startswith("#"))
    entries = yaml.safe_load(text) or {}
    entry = entries.setdefault(key, {"command": command, "runs": []})
    entry["runs"] = [*(entry.get("runs") or []), as_record(measurement)]
    entry.pop("pending", None)
    path.write_text(header + yaml.safe_dump(entries, sort_keys=False, width=110), encoding="utf-8")


def main(argv: list[str]) -> int:
    if "--" not in argv:
        raise SystemExit("usage: python tools/time_command.py KEY [--machine TEXT] [--note TEXT] -- COMMAND ...")
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="tools/time_command.py")
    parser.add_argument("key")
    parser.add_argument("--machine", default=None)
    parser.add_argument("--note", default="tools/time_command.py")
    args = parser.parse_args(argv[:split])
    command = argv[split + 1:]
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True,
                            text=True, check=False).stdout.strip() or "not recorded"  # the code it ran
    wall, cpu, load = run_timed(command)
    measurement = Measurement(wall_s=round(wall, 1), cpu_s=round(cpu, 1), machine=args.machine or machine_line(),
                              load=round(load, 1), date=datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
                              commit=commit, source=args.note)
    record(args.key, " ".join(command), measurement)
    print(f"{args.key}: {wall:.1f} s wall, {cpu:.1f} CPU-s, load {load:.1f}, commit {commit} -> {TIMINGS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
