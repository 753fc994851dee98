"""`demo ladder`'s one plan (`experiments.ladder.plan.LadderPlan`): results.json records it and reads
it back (a results.json written before it held its options too), and `demo ladder --help` shows
each option's default from the presets, stated nowhere else."""

from __future__ import annotations

import json
import re
from dataclasses import fields, replace

import pytest

from robustvlm.cli import build_parser
from robustvlm.experiments.base import flag, option_fields, option_spec
from robustvlm.experiments.ladder.plan import (
    DEMO,
    DEMO_QUICK,
    FULL,
    PRESETS,
    QUICK,
    ZOO,
    ZOO_QUICK,
    LadderPlan,
)
from robustvlm.experiments.ladder.run import ladder_methods

#: `demo ladder --quick --inferred-envs`'s plan in its results.json before the plan held its options
#: (its rungs every cell trained; `--test-pictures` its VLM rungs' `test_per_env`)
EARLIER_QUICK = json.loads(
    '{"rungs": [["mnist", "pixels"], ["mnist", "tower:tiny:clip"], ["mnist", "vlm:head:tiny:idefics3"]], "per_env": '
    '200, "hidden": 32, "steps": 40, "eval_every": 20, "seeds": [0], "anneal": 20, "holdout": 0.1, "workers": 1, '
    '"methods": ["erm", "irm", "vrex", "birm", "dynamic_birm", "oracle"], "infer_on": [["mnist", "pixels"]], "vlm": '
    '{"per_env": 40, "image_size": 16, "steps": 6, "anneal": 3, "batch_size": 8, "lr": 0.001, "eval_every": 3, '
    '"penalty_weight": 100.0, "candidates_only": false, "dynamic_birm_smooth": "lambda", "test_per_env": null}}')
EARLIER_ZOO = {**EARLIER_QUICK, "rungs": [["fashion", "vlm:full:zoo:quick-idefics3"]], "infer_on": [],
               "vlm": {**EARLIER_QUICK["vlm"], "dynamic_birm_smooth": "risks", "test_per_env": 300}}


@pytest.mark.parametrize("plan", [*PRESETS.values(), DEMO, DEMO_QUICK, replace(ZOO, test_pictures=3000, seeds=(4,))])
def test_results_json_reads_back_the_plan_it_records(plan):
    assert LadderPlan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan


def test_a_results_json_written_before_reads_as_the_same_plan():
    earlier = LadderPlan.from_dict({"quick": True, **EARLIER_QUICK})
    assert earlier == replace(QUICK, inferred_envs=True, methods=tuple(EARLIER_QUICK["methods"]))
    now = json.loads(json.dumps(earlier.to_dict()))  # what it recorded, it records again
    assert {k: now[k] for k in EARLIER_QUICK if k != "vlm"} == {k: v for k, v in EARLIER_QUICK.items() if k != "vlm"}
    assert now["vlm"] == {k: v for k, v in EARLIER_QUICK["vlm"].items() if k != "test_per_env"}
    zoo = LadderPlan.from_dict({"quick": True, **EARLIER_ZOO})
    assert zoo == replace(ZOO_QUICK, modes=("full",), test_pictures=300, methods=zoo.methods)


def test_the_presets_train_the_ladders_cells():
    ids = {name: [f"{s}/{r.id}" for s, r in plan.cells] for name, plan in PRESETS.items()}
    assert ids == {
        "default": ["fashion/pixels", "fashion/tower:tiny:idefics3", "fashion/tower:tiny:clip", "mnist/pixels",
                    "fashion/vlm:head:tiny:idefics3", "fashion/vlm:lora:tiny:idefics3", "fashion/vlm:full:tiny:idefics3"],
        "quick": ["mnist/pixels", "mnist/tower:tiny:clip", "mnist/vlm:head:tiny:idefics3"],
        "zoo": [f"fashion/vlm:{m}:zoo:idefics3-siglip-m" for m in ("head", "lora", "full")],
        "zoo-quick": [f"fashion/vlm:{m}:zoo:quick-idefics3" for m in ("head", "full")],
    }
    assert FULL == LadderPlan()  # the class's defaults are the full ladder's


def _help_lines(monkeypatch) -> dict[str, str]:
    """{"--seeds": its help, ...} of `demo ladder --help`, drawn wide enough for one line each."""
    monkeypatch.setenv("COLUMNS", "1000")
    parser = build_parser()

    def sub(p, name):
        return next(a.choices[name] for a in p._actions if isinstance(a.choices, dict) and name in a.choices)

    text = sub(sub(parser, "demo"), "ladder").format_help()
    return {m.group(1): m.group(2) for m in re.finditer(r"^  (--[a-z-]+)(?: [A-Z]+)?\s+(.*)$", text, re.MULTILINE)}


def _shown(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def test_the_help_shows_each_default_from_the_presets(monkeypatch):
    lines = _help_lines(monkeypatch)
    for plan_field in option_fields(LadderPlan):
        spec = option_spec(plan_field)
        assert "default" not in spec.help, plan_field.name  # stated by the presets, not in the help's words
        if plan_field.type == "bool":
            continue
        entry = lines[flag(plan_field.name)]
        assert entry.startswith(spec.help), plan_field.name
        shown = entry[len(spec.help):]
        presets = [p for p in PRESETS.values() if spec.with_zoo is None or p.zoo == spec.with_zoo]
        values = [getattr(p, plan_field.name) for p in presets]
        if plan_field.name == "methods":
            assert values == [None] * len(values) and shown == f" (default: {','.join(ladder_methods())})"
        elif plan_field.name == "test_pictures":
            assert values == [None] * len(values) and shown == " (default: as many as each training environment)"
        else:
            assert shown.startswith(f" (default: {_shown(values[0])}")  # the first preset reading it
            assert all(f": {_shown(v)}" in shown or shown.startswith(f" (default: {_shown(v)}") for v in values)
    assert lines["--seeds"].endswith("(default: 0,1,2; --quick / --quick --zoo: 0)")
    assert lines["--members"].endswith("(default: idefics3-siglip-m; --quick: quick-idefics3)")


def test_every_plan_field_is_an_option_or_a_setting_no_option_sets():
    options = {f.name for f in option_fields(LadderPlan)}
    settings = {f.name for f in fields(LadderPlan)} - options
    assert options == {"quick", "zoo", "members", "modes", "inferred_envs", "methods", "seeds", "test_pictures"}
    assert settings == {"rungs", "vlm_source", "per_env", "hidden", "steps", "eval_every", "anneal", "holdout",
                        "workers", "infer_on", "vlm"}
