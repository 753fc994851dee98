"""Typed hyperparameters: one frozen dataclass per objective (declared in its module, the type
parameter of its class) and per reward loss (made from its declared HParams), read by
attribute, checked when the config is read."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from robustvlm.errors import ConfigError
from robustvlm.models.outputs import AnswerOutputs
from robustvlm.objectives import REGISTRY, build_objective
from robustvlm.objectives.base import HParam, LossParts, Objective, config_key, field_name
from robustvlm.reward.losses import LOSSES

ENVS = ["a", "b"]


@pytest.mark.parametrize("method", sorted(REGISTRY))
def test_every_objective_has_a_frozen_dataclass_of_its_declared_defaults(method):
    cls = REGISTRY[method].hparams_class
    hp = cls.from_config({}, method)
    assert dataclasses.is_dataclass(hp)
    assert hp.to_config() == {key: p.default for key, p in REGISTRY[method].hparams.items()}
    if hp.to_config():
        name = dataclasses.fields(hp)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(hp, name, 1)


@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_every_reward_loss_registers_the_same_way(loss):
    spec = LOSSES[loss]
    hp = spec.resolve({"use_margin": False})
    assert hp.use_margin is False
    assert hp.to_config() == {**{k: p.default for k, p in spec.hparams.items()}, "use_margin": False}


def test_a_keyword_key_is_a_field_with_an_underscore_and_keeps_its_config_name():
    objective = build_objective("irm", ENVS, {"lambda": 1234.0, "anneal_steps": 7})
    assert objective.hp.lambda_ == 1234.0 and objective.hp.anneal_steps == 7
    assert objective.hp.to_config()["lambda"] == 1234.0
    assert objective.penalty_weight(7) == 1234.0 and objective.penalty_weight(6) == 1.0


def test_a_misspelt_key_is_refused_when_read_naming_the_owner_and_the_known_keys():
    with pytest.raises(ConfigError, match=r"method 'groupdro' has no hyperparameter\(s\) \['etta'\].*eta"):
        build_objective("groupdro", ENVS, {"etta": 0.1})
    with pytest.raises(ConfigError, match=r"loss_args: loss 'standard' has no hyperparameter\(s\) \['text_mode'\]"):
        LOSSES["standard"].resolve({"text_mode": "drop"})


def test_a_misspelt_name_in_code_is_an_error_not_a_default():
    hp = REGISTRY["dynamic_birm"].hparams_class.from_config({}, "dynamic_birm")
    assert hp.eps_rel == 0.1
    with pytest.raises(AttributeError):
        _ = hp.eps_rell


@pytest.mark.parametrize("method", sorted(REGISTRY))
def test_every_objective_is_typed_by_the_class_it_reads_its_hyperparameters_from(method):
    """`Objective.hp`'s static type (the class's type argument) is the class `hp` is built from,
    every field has a real annotation, and `hparams` is read from that class's fields."""
    objective = REGISTRY[method]
    (typed,) = typing.get_args(objective.__orig_bases__[0])  # type: ignore[attr-defined]
    assert typed is objective.hparams_class
    assert isinstance(objective(ENVS).hp, typed)
    hints = typing.get_type_hints(typed)
    fields = dataclasses.fields(typed)
    assert [config_key(f.name) for f in fields] == list(objective.hparams)
    assert all(hints[f.name] is not typing.Any for f in fields)
    assert all(f.default == objective.hparams[config_key(f.name)].default for f in fields)


def test_config_keys_and_field_names_map_both_ways():
    for key in ("lambda", "lambda_before", "eta", "class", "seed_"):
        assert config_key(field_name(key)) == key


def test_an_objective_may_still_declare_a_dict_of_hparams():
    class Weighted(Objective):
        name = "weighted"
        hparams = {"weight": HParam(2.0, ("log", 1.0, 4.0), "a weight"), "lambda": HParam(1, None, "")}

        def __call__(self, out: AnswerOutputs, step: int) -> LossParts:
            raise NotImplementedError

    objective = Weighted(ENVS, weight=3.0)
    assert objective.hp.weight == 3.0 and objective.hp.lambda_ == 1
    assert objective.hp.to_config() == {"weight": 3.0, "lambda": 1}
    assert list(Weighted.hparams) == ["weight", "lambda"]
    with pytest.raises(ConfigError, match="method 'weighted' has no hyperparameter"):
        Weighted(ENVS, wieght=1.0)
