"""`ModelRef`: the six spellings of a model name parsed in one place, and no prefix check on a model
name anywhere else in the sources."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from robustvlm.model_ref import (
    BUILT_OFFLINE,
    FOLDER,
    HUB,
    REAL,
    SERVED,
    TINY,
    WEIGHTS,
    ZOO,
    ModelRef,
)

SRC = Path(__file__).resolve().parents[1] / "src" / "robustvlm"
PREFIX = r"((TINY|ZOO|REAL|SERVED)_PREFIX|[\"'](tiny|zoo|real|openai):)"
PREFIX_CHECK = re.compile(rf"(startswith|removeprefix|removesuffix)\([^)]*{PREFIX}|\[len\({PREFIX}|{PREFIX}[\"']? in ")
"""A prefix test on a model name: `name.startswith(TINY_PREFIX)`, `name[len("zoo:"):]`, `"real:" in name`."""
HAND_BUILT = re.compile(rf"(tiny|zoo|real|openai):\{{|{PREFIX}[\"']?\s*\+|\{{(TINY|ZOO|REAL|SERVED)_PREFIX\}}\{{")
"""A model name built by hand: `f"zoo:{member}"`, `f"{ZOO_PREFIX}{member}"`, `TINY_PREFIX + kind`, `"real:" + key`
(not a placeholder in a message: `f"named {SERVED_PREFIX}MODEL"`)."""


@pytest.mark.parametrize(("name", "kind", "location"), [
    ("HuggingFaceTB/SmolVLM-256M-Instruct", HUB, "HuggingFaceTB/SmolVLM-256M-Instruct"),
    ("./runs/erm/final", FOLDER, "./runs/erm/final"),
    ("/abs/model", FOLDER, "/abs/model"),
    ("tiny:idefics3", TINY, "idefics3"),
    ("zoo:idefics3-siglip-m", ZOO, "idefics3-siglip-m"),
    ("real:smolvlm-256m", REAL, "smolvlm-256m"),
    ("openai:gpt-4o", SERVED, "gpt-4o"),
])
def test_each_spelling_parses_to_its_kind_and_location(name, kind, location):
    ref = ModelRef.parse(name)
    assert (ref.name, ref.kind, ref.location) == (name, kind, location)
    if kind not in (HUB, FOLDER):
        assert ModelRef.of(kind, location) == ref


def test_a_name_beside_an_existing_folder_is_a_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    assert ModelRef.parse("runs/final").kind == FOLDER and ModelRef.parse("org/name").kind == HUB


def test_capabilities_follow_the_kind():
    assert ModelRef.parse("openai:m").capabilities == frozenset()
    assert ModelRef.parse("tiny:clip").capabilities == {WEIGHTS, BUILT_OFFLINE}
    assert ModelRef.parse("real:smolvlm-256m").capabilities == {WEIGHTS, BUILT_OFFLINE}
    assert ModelRef.parse("zoo:m").capabilities == {WEIGHTS} == ModelRef.parse("org/name").capabilities
    assert ModelRef.parse("tiny:clip").family == "clip" and ModelRef.parse("org/name").family is None


def test_the_check_finds_a_prefix_test():
    for line in ('if name.startswith(TINY_PREFIX):', 'kind = name[len("tiny:"):]', 'if "zoo:" in name:',
                 'key = name.removeprefix(REAL_PREFIX)', 'n.startswith(("tiny:", "openai:"))'):
        assert PREFIX_CHECK.search(line), line
    assert not PREFIX_CHECK.search('name = f"{ZOO_PREFIX}{member}"')


def test_each_prefixed_kind_has_a_constructor():
    assert ModelRef.tiny("clip") == ModelRef.parse("tiny:clip")
    assert ModelRef.zoo("idefics3-siglip-m") == ModelRef.parse("zoo:idefics3-siglip-m")
    assert ModelRef.real("smolvlm-256m") == ModelRef.parse("real:smolvlm-256m")


def test_the_check_finds_a_hand_built_name():
    for line in ('name = f"{ZOO_PREFIX}{member}"', 'print(f"zoo:{r.name}: rebuilt")', 'm = TINY_PREFIX + kind',
                 'm = "real:" + key', "rung = f\"vlm:{mode}:{ZOO_PREFIX}{name}\"", 'x = f"`tiny:{kind}`"'):
        assert HAND_BUILT.search(line), line
    for line in ('name = ModelRef.zoo(member).name', 'raise ConfigError(f"a model is named {SERVED_PREFIX}MODEL")',
                 'what a "tiny:" model is trained on', 'f"tiny_options apply to \'tiny:\' models"'):
        assert not HAND_BUILT.search(line), line


def _outside_the_parser(pattern: re.Pattern[str]) -> list[str]:
    """`file:line: text` of each line of src/robustvlm (but model_ref.py) that `pattern` finds."""
    return [f"{path.relative_to(SRC)}:{number}: {line.strip()}"
            for path in sorted(SRC.rglob("*.py")) if path.name != "model_ref.py"
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if pattern.search(line)]


def test_no_hand_built_model_name_outside_the_parser():
    found = _outside_the_parser(HAND_BUILT)
    assert found == [], "build the name with ModelRef.tiny/zoo/real(...).name instead:\n" + "\n".join(found)


def test_no_prefix_check_on_a_model_name_outside_the_parser():
    found = _outside_the_parser(PREFIX_CHECK)
    assert found == [], "parse the name with robustvlm.model_ref.ModelRef instead:\n" + "\n".join(found)
