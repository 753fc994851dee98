"""`ModelRef`: the six spellings of a model name parsed in one place, and no prefix check on a model
name anywhere else in the sources."""

from __future__ import annotations

import ast
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


# --- ModelRef is the value below the boundary (issue 50) -------------------------------------------

BOUNDARY = ("cli", "config")
"""The packages that read options and configs: where a model name is text, parsed into a ModelRef."""

MODEL_PARAMETER = re.compile(r"^(model|models|model_name|model_names|model_ref|name_or_path|model_dir|vision_model"
                             r"|init|tower|backbone|policy|teacher|student|base_model)$")
"""Parameter names that name a model in the sources (found by grepping the `def`s): `model`,
`model_name`, `name_or_path`, `vision_model` (mc build), `init` and `tower` (zoo recipes and probes),
`backbone` (the frozen reward rung), `policy` (rm sample). Names that also mean other things are not
in it: `name` (metrics, figures, corruptions), `base`/`baseline` (objectives, result labels),
`member` (a zoo member is its recipe's key, `ModelRef.zoo(member)` makes the model)."""

NOT_A_MODEL_REFERENCE = {
    "data/results": "rows of another tool's result files (lmms-eval, VLMEvalKit): the model is the text that "
                    "tool wrote, a label of the row, never loaded",
    "analysis": "computes on result tables keyed by the model's label (a ModelRef's `name` as results hold "
                "it), never loads a model",
    "model_ref.py": "the constructors take the location part of a spelling (`ModelRef.real(model)`)",
    "evaluation/in_context.py": "`policy` is the demonstrations' selection policy (random, same-class, ...)",
    "models/text_encoder.py": "the sentence encoder of `mc build --distractors text` (a hub id or folder for "
                              "sentence-transformers, never a tiny/zoo/served VLM)",
}
"""Where a parameter named like a model is text on purpose: path (a package, a module, or
module:function) -> why."""

PARSE_ELSEWHERE = {
    "models/zoo_recipes.py": "a recipe's `tower` and `init` fields are its config (the recipe table), read "
                             "by `Recipe.tower_ref` and `Recipe.init_member`",
    "workflows/measure/transformers_serve.py": "its own command line (`python -m robustvlm.workflows.measure."
                                               "transformers_serve MODEL -- ...`)",
    "figures/write.py": "its own command line (`python -m robustvlm.figures DOC NAME=RESULTS_DIR`), "
                         "where RESULTS_DIR may be `zoo:NAME`",
}
"""Modules below the boundary that parse a model name, each with why (a saved file's name is
read with `ModelRef.from_record`, counted apart)."""


def _modules() -> list[tuple[str, ast.Module]]:
    """(path relative to src/robustvlm, syntax tree) of every module below the boundary."""
    return [(path.relative_to(SRC).as_posix(), ast.parse(path.read_text(encoding="utf-8")))
            for path in sorted(SRC.rglob("*.py")) if path.relative_to(SRC).parts[0] not in BOUNDARY]


COLLECTIONS = {"Sequence", "list", "set", "frozenset", "Iterable", "Collection"}


def _names_str(annotation: ast.expr | None) -> bool:
    """Whether an annotation makes a value text: `str`, a union holding it (`str | None`,
    `str | Path`) or a collection of it (`Sequence[str]`); not a mapping's keys or a tuple's field."""
    if isinstance(annotation, ast.Name):
        return annotation.id == "str"
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return _names_str(annotation.left) or _names_str(annotation.right)
    if isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Name):
        return annotation.value.id in COLLECTIONS and _names_str(annotation.slice)
    return False


def _exempt(module: str, function: str) -> bool:
    return any(module == key or module.startswith(key + "/") or f"{module}:{function}" == key
               for key in NOT_A_MODEL_REFERENCE)


def _model_parameters_as_text(modules: list[tuple[str, ast.Module]]) -> list[str]:
    """`module:line: function(parameter: annotation)` of each parameter named like a model and
    annotated as text, outside NOT_A_MODEL_REFERENCE."""
    found = []
    for module, tree in modules:
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or _exempt(module, node.name):
                continue
            for arg in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs):
                if MODEL_PARAMETER.match(arg.arg) and _names_str(arg.annotation):
                    annotation = ast.unparse(arg.annotation) if arg.annotation is not None else ""
                    found.append(f"{module}:{node.lineno}: {node.name}({arg.arg}: {annotation})")
    return found


def test_the_check_finds_a_model_parameter_taken_as_text():
    tree = ast.parse("def load(model: str, *, init: str | None = None, models: Sequence[str] = (),\n"
                     "         ref: ModelRef, name: str = '', policy: ModelRef | None = None,\n"
                     "         model_ref: dict[str, int], backbone: tuple[ModelRef, str]) -> None: ...")
    assert [f.split(": ", 1)[1] for f in _model_parameters_as_text([("x.py", tree)])] == [
        "load(model: str)", "load(init: str | None)", "load(models: Sequence[str])"]
    assert _model_parameters_as_text([("data/results/x.py", tree)]) == []


def test_no_function_below_the_boundary_takes_a_model_as_text():
    found = _model_parameters_as_text(_modules())
    assert found == [], "take a robustvlm.model_ref.ModelRef (parsed in cli/ or config/) instead:\n" + "\n".join(found)


def test_each_exemption_still_names_a_module_of_the_sources():
    for key in (*NOT_A_MODEL_REFERENCE, *PARSE_ELSEWHERE):
        assert (SRC / key.partition(":")[0]).exists(), key


def _calls(tree: ast.Module, method: str) -> int:
    """How many `ModelRef.<method>(...)` calls `tree` holds."""
    return sum(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == method
               and isinstance(n.func.value, ast.Name) and n.func.value.id == "ModelRef" for n in ast.walk(tree))


def test_model_names_are_parsed_only_at_the_boundary():
    parsing = {module: n for module, tree in _modules() if module != "model_ref.py" and (n := _calls(tree, "parse"))}
    unexplained = sorted(set(parsing) - set(PARSE_ELSEWHERE))
    assert unexplained == [], ("parse the name where the option or config is read (cli/, config/) and pass the "
                               "ModelRef on; a name read back from a saved file: ModelRef.from_record\n"
                               + "\n".join(f"{m}: {parsing[m]} call(s)" for m in unexplained))
    assert sum(parsing.values()) <= 4, parsing  # the exceptions do not grow unnoticed


def test_a_saved_name_reads_back_as_the_reference_that_wrote_it(tmp_path):
    for ref in (ModelRef.tiny("clip"), ModelRef.zoo("m"), ModelRef.parse("org/name"), ModelRef.folder(tmp_path)):
        assert ModelRef.from_record(ref.name) == ref
    assert ModelRef.folder(tmp_path / "final") == ModelRef(str(tmp_path / "final"), FOLDER, str(tmp_path / "final"))


def test_eval_from_the_command_line_parses_the_model_name_once(tasks_data, tmp_path, monkeypatch):
    """`robustvlm eval --model tiny:idefics3` down to the loaded model and its scores: the name is
    parsed once, by the CLI; everything below takes the ModelRef."""
    from robustvlm.cli import main

    parsed: list[str] = []
    parse = ModelRef.parse.__func__  # type: ignore[attr-defined]

    def spy(cls: type[ModelRef], name: str) -> ModelRef:
        parsed.append(name)
        return parse(cls, name)

    monkeypatch.setattr(ModelRef, "parse", classmethod(spy))
    out = tmp_path / "eval"
    assert main(["eval", "--model", "tiny:idefics3", "--data", str(tasks_data), "--out", str(out),
                 "--max-per-env", "1", "--max-new-tokens", "2", "--metrics", "exact"]) == 0
    assert (out / "predictions.jsonl").is_file()
    assert parsed == ["tiny:idefics3"]
