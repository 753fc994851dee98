"""Shared test settings and the tiny offline models and data that several test folders use.

Tiny models run fastest (and least noisily) on one CPU thread. Tests are imported with
`--import-mode=importlib` (pyproject), so test files in different folders may share a name; the
support modules in tests/helpers (stub judge server, toy tasks, distributed workers) are
importable by name because that folder is put on sys.path here.

The session fixtures below are built once and shared by every test that asks for them: tests
read them and must not change them (train, configure_trainable, edit a chat template, wrap in
DDP, write into the data folder). A test that needs to change one builds its own. robustvlm is
imported inside the fixtures, after the environment below is set (huggingface_hub reads
HF_HUB_OFFLINE when it is first imported).

Test tiers (markers registered in pyproject): a test is marked by where it lives (`TIERS` below),
besides any marker it carries itself. `make test-fast` deselects e2e, docs, slow and distributed;
`make test` runs everything.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import torch

if TYPE_CHECKING:
    from robustvlm.data.records import Example
    from robustvlm.models.backends import Backend

HELPERS = Path(__file__).resolve().parent / "helpers"
sys.path.insert(0, str(HELPERS))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
torch.set_num_threads(1)

#: {path under tests/ (a folder ends in "/"): markers every test collected there gets}.
#: e2e: runs a whole demo or command pipeline; docs: checks the documentation against the code;
#: slow: one test over ~5 s; distributed: spawns torchrun processes.
TIERS: dict[str, tuple[str, ...]] = {
    "test_documented_commands.py": ("docs", "e2e"),
    "test_docs_site.py": ("docs",),
    "test_figures.py": ("docs", "e2e"),
    "test_wheel.py": ("e2e", "slow"),
    "workflows/demos/": ("e2e",),
    "workflows/test_real_server.py": ("e2e", "slow"),
    "objectives/test_distributed_penalty.py": ("distributed",),
}

TESTS = Path(__file__).resolve().parent


def tier_markers(path: Path) -> tuple[str, ...]:
    """The markers `TIERS` gives a test file at `path` (absolute), by its path under tests/."""
    relative = path.resolve().relative_to(TESTS).as_posix()
    return tuple(marker for prefix, markers in TIERS.items()
                 for marker in markers if relative == prefix or (prefix.endswith("/") and relative.startswith(prefix)))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each collected test with its file's tier markers (`TIERS`)."""
    for item in items:
        for marker in tier_markers(item.path):
            item.add_marker(marker)


@pytest.fixture(autouse=True)
def response_cache_folder(tmp_path, monkeypatch) -> Path:
    """Each test's own served-model response cache (`ROBUSTVLM_CACHE`): nothing is written to the
    user's cache and no test sees another's answers."""
    folder = tmp_path / "response_cache"
    monkeypatch.setenv("ROBUSTVLM_CACHE", str(folder))
    return folder


def persistent_cache_folder() -> Path:
    """Where the tests keep what outlives a session (the quick zoo): $ROBUSTVLM_TEST_CACHE, else
    ~/.cache/robustvlm-tests. Delete it at will; what is missing is rebuilt."""
    return Path(os.environ.get("ROBUSTVLM_TEST_CACHE") or Path.home() / ".cache" / "robustvlm-tests")


@pytest.fixture(scope="session")
def quick_zoo() -> Callable[..., Path]:
    """`quick_zoo(*members)`: a model-zoo cache folder (`ROBUSTVLM_CACHE`) holding those members of
    the quick zoo (all four when none are named), shared by the zoo demos' tests (members are read,
    never changed). Members are built once and kept across test sessions in `persistent_cache_folder()`:
    the folder is named by a hash of the zoo build's source and every module it imports
    (`source_hash`), and a member inside it by its recipe's key, so a change to either rebuilds;
    `zoo build` locks each member, so xdist workers building one at once wait for each other."""
    from source_hash import source_hash

    from robustvlm.workflows.zoo.build import build_members, selected

    cache = persistent_cache_folder() / f"quick-zoo-{source_hash('robustvlm.workflows.zoo.build')}"

    def get(*members: str) -> Path:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("ROBUSTVLM_CACHE", str(cache))
            build_members(selected(quick=True, members=list(members) or None))
        return cache

    return get


@pytest.fixture(scope="session")
def quick_demo(tmp_path_factory) -> Callable[..., Path]:
    """`quick_demo(name, *options)`: the output folder of `robustvlm demo NAME --quick OPTIONS`, run
    once per test session for each distinct command line and shared by every test that reads it;
    what the run printed is in the file `stdout.txt` beside the folder. Tests read the folder and
    must not change it: one that re-runs or resumes into it works on a copy (`shutil.copytree`)."""
    from contextlib import redirect_stdout
    from io import StringIO

    from robustvlm.cli import main

    runs: dict[tuple[str, ...], Path] = {}

    def get(name: str, *options: str) -> Path:
        key = (name, *options)
        if key not in runs:
            out = tmp_path_factory.mktemp(f"demo-{name}") / "out"
            with redirect_stdout(StringIO()) as printed:
                code = main(["demo", name, "--quick", *options, "--out", str(out)])
            assert code == 0, f"demo {name} --quick {' '.join(options)} failed"
            (out.parent / "stdout.txt").write_text(printed.getvalue(), encoding="utf-8")
            runs[key] = out
        return runs[key]

    return get


@pytest.fixture(scope="session")
def built_in_data(tmp_path_factory) -> Callable[..., Path]:
    """`built_in_data(name, n_per_env, seed=0)`: the folder of the built-in benchmark `name`
    (`data.synth.synthesize`), built once per (name, n_per_env, seed)."""
    from robustvlm.data.synth import synthesize

    built: dict[tuple[str, int, int], Path] = {}

    def get(name: str, n_per_env: int, seed: int = 0) -> Path:
        key = (name, n_per_env, seed)
        if key not in built:
            built[key] = tmp_path_factory.mktemp(name)
            synthesize(name, built[key], seed=seed, n_per_env=n_per_env)
        return built[key]

    return get


@pytest.fixture(scope="session")
def tasks_data(built_in_data) -> Path:
    """The built-in `tasks` instruction data (seed 0, 2 records per environment): its data.jsonl."""
    return built_in_data("tasks", 2) / "data.jsonl"


@pytest.fixture(scope="session")
def domains_suite(tmp_path_factory) -> Path:
    """The built-in `domains` benchmark (seed 0, 3 images per class and domain): shapes/ and
    digits/ image-folder layouts and manifest.json."""
    from robustvlm.data.synth import synthesize

    root = tmp_path_factory.mktemp("domains")
    synthesize("domains", root, seed=0, n_per_env=3)
    return root


@pytest.fixture(scope="session")
def shapes_examples(domains_suite) -> list[Example]:
    """The shapes suite of `domains_suite` as Examples (4 domains x 8 classes x 3 images)."""
    from robustvlm.data.loaders import load_examples

    return load_examples(domains_suite / "shapes", fmt="folder", verbose=False)


@pytest.fixture(scope="session")
def shapes_backend(shapes_examples) -> Backend:
    """"tiny:idefics3" through load_backend (eval mode), its tokenizer trained on the task corpus
    of `shapes_examples` (as the icl and diagnosis workflows build it)."""
    from robustvlm.models.backends import load_backend
    from robustvlm.workflows.measure.icl_eval import task_corpus

    return load_backend("tiny:idefics3", corpus=task_corpus(shapes_examples))


@pytest.fixture(scope="session")
def tiny_vlms() -> Callable[[str], tuple]:
    """`tiny_vlms(kind)`: `build_tiny_vlm(kind)` with its defaults (seed 0, built-in corpus) as
    (model, processor), built once per kind (a key of `tiny_families.VLM_FAMILIES`); the model is in
    train mode, as built."""
    from robustvlm.models.tiny import build_tiny_vlm

    built: dict[str, tuple] = {}

    def get(kind: str) -> tuple:
        if kind not in built:
            built[kind] = build_tiny_vlm(kind)
        return built[kind]

    return get


@pytest.fixture(scope="session")
def tiny_backends() -> Callable[[str], Backend]:
    """`tiny_backends(kind)`: `load_backend(f"tiny:{kind}")` (eval mode), loaded once per kind
    (a key of `tiny_families.VLM_FAMILIES`, "clip", "siglip")."""
    from robustvlm.models.backends import load_backend

    loaded: dict[str, Backend] = {}

    def get(kind: str) -> Backend:
        if kind not in loaded:
            loaded[kind] = load_backend(f"tiny:{kind}")
        return loaded[kind]

    return get
