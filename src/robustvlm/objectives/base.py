"""The objective interface: one class per method, hyperparameters declared once.

An objective declares its hyperparameters once, as the fields of a frozen dataclass
(`Hyperparameters`), each with `hparam(default, search range, meaning)`: that class is the typed
value the objective reads (`self.hp.eta`, checked by mypy), and its `HParam`s feed sweeps, docs
and config checks. A key a config misspells is refused when the config is read
(`Hyperparameters.from_config`), a name the code misspells is a type error. The reward losses
declare dicts of `HParam`s, from which `hyperparameter_class` makes the dataclass at run time.
"""

from __future__ import annotations

import dataclasses
import keyword
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, cast

import torch

from robustvlm.errors import ConfigError
from robustvlm.models.outputs import AnswerOutputs

if TYPE_CHECKING:
    from robustvlm.objectives.linear_cell import BatchedLoss

#: The experiments (`robustvlm demo NAME`) whose method lists an objective can join: each
#: objective declares those it applies to (`Objective.applies_to`), and every experiment's
#: default method list is the registered objectives that declare it (`objectives.applicable_methods`).
TASKS = "tasks"
LADDER = "ladder"
INVARIANCE = "invariance"
EVERY_EXPERIMENT = frozenset({TASKS, LADDER, INVARIANCE})

@dataclass(frozen=True)
class HParam:
    """A hyperparameter: its default, a search range for sweeps, and what it means.

    `search` is a sampling rule for random sweeps (None: not swept): ("log", low, high)
    log-uniform, ("int_log", low, high) log-uniform rounded to an integer, ("uniform", low, high),
    or ("choice", value, ...).
    """

    default: Any
    search: tuple | None = None
    help: str = ""


def check_hparam_values(declared: Mapping[str, HParam], given: Mapping[str, Any], owner: str) -> None:
    """ConfigError unless every key of `given` is declared and its value is of its default's kind
    (a finite number for a number, a bool for a bool, text for text; any value where the default
    is None, but never NaN or an infinity) and, where a text default has a `("choice", ...)` search, one of the choices. `owner` names it in messages
    ("method 'irm'")."""
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise ConfigError(f"{owner} has no hyperparameter(s) {unknown}; known: {sorted(declared)}")
    for key, value in given.items():
        _check_value(declared[key], key, value, owner)


def _check_value(declared: HParam, key: str, value: Any, owner: str) -> None:
    """ConfigError unless `value` suits hyperparameter `key` (`check_hparam_values`)."""
    default, search = declared.default, declared.search
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{owner}: {key} must be a finite number, not {value!r}")
    if isinstance(default, str) and search is not None and search[0] == "choice":
        if value not in search[1:]:  # an enumeration: its choices are every valid value
            raise ConfigError(f"{owner}: {key} must be one of {list(search[1:])}, not {value!r}")
    elif isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{owner}: {key} must be true or false, not {value!r}")
    elif isinstance(default, int | float):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{owner}: {key} must be a number, not {value!r}")
    elif isinstance(default, str) and not isinstance(value, str):
        raise ConfigError(f"{owner}: {key} must be text, not {value!r}")


def field_name(key: str) -> str:
    """The dataclass field of config key `key`: the key itself, with a trailing underscore where
    it is a Python keyword (`lambda` -> `lambda_`)."""
    return f"{key}_" if keyword.iskeyword(key) else key


def config_key(field: str) -> str:
    """The config key of dataclass field `field`: the inverse of `field_name` (`lambda_` -> `lambda`)."""
    key = field.removesuffix("_")
    return key if key != field and keyword.iskeyword(key) else field


HPARAM = "hparam"
"""The metadata key under which a hyperparameter field keeps its `HParam`."""


def hparam(default: Any, search: tuple | None = None, help: str = "") -> Any:
    """A field of a `Hyperparameters` dataclass: `default`, with the `HParam` (search range,
    meaning) in the field's metadata. Typed Any, as `dataclasses.field` is, so that
    `eta: float = hparam(1e-2, ...)` type-checks."""
    return dataclasses.field(default=default, metadata={HPARAM: HParam(default, search, help)})


@dataclass(frozen=True)
class Hyperparameters:
    """Base of the frozen dataclasses of hyperparameters: one field per hyperparameter
    (`field_name` of its config key) declared with `hparam`; an objective declares its class
    (e.g. `GroupDROHyperparameters`), so `self.hp.eta` is typed for mypy and IDEs."""

    @classmethod
    def declared(cls) -> dict[str, HParam]:
        """{config key: HParam} of every field, in field order."""
        return {config_key(f.name): f.metadata[HPARAM] for f in dataclasses.fields(cls)}

    @classmethod
    def from_config(cls: type[HP], given: Mapping[str, Any], owner: str) -> HP:
        """The values of `given` over the defaults; ConfigError naming `owner` on an undeclared
        key or a value of the wrong kind (`check_hparam_values`)."""
        check_hparam_values(cls.declared(), given, owner)
        return cls(**{field_name(key): value for key, value in given.items()})

    def to_config(self) -> dict[str, Any]:
        """{config key: value}, as a config writes them."""
        return {key: getattr(self, field_name(key)) for key in self.declared()}


HP = TypeVar("HP", bound=Hyperparameters)


@dataclass(frozen=True)
class UntypedHyperparameters(Hyperparameters):
    """Base of the classes `hyperparameter_class` makes at run time from a dict of `HParam`s
    (the reward losses'): their fields are unknown to mypy, so any attribute is Any."""

    if TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any: ...


def hyperparameter_class(name: str, declared: Mapping[str, HParam]) -> type[UntypedHyperparameters]:
    """A frozen dataclass `name` with one field per entry of `declared` (module doc)."""
    fields = [
        (field_name(key), Any, dataclasses.field(default=hp.default, metadata={HPARAM: hp}))
        for key, hp in declared.items()
    ]
    cls = dataclasses.make_dataclass(name, fields, bases=(UntypedHyperparameters,), frozen=True)
    return cast(type[UntypedHyperparameters], cls)


@dataclass
class LossParts:
    """What one objective step returns.

    Attributes:
        loss: scalar tensor to back-propagate.
        risk: R_emp, the empirical risk (detached float).
        penalty: R_inv, the invariance penalty before weighting (detached float; 0 for ERM).
        weight: lambda, the penalty weight used at this step.
        env_risks: per-environment mean token risk (`AnswerOutputs.token_risk`), by environment name.
        extras: anything else worth logging (e.g. GroupDRO weights as `q/<env>`).
    """

    loss: torch.Tensor
    risk: float
    penalty: float = 0.0
    weight: float = 0.0
    env_risks: dict[str, float] = field(default_factory=dict)
    extras: dict[str, float] = field(default_factory=dict)

    def log_row(self) -> dict[str, float]:
        """Flat row for train_log.jsonl: R_emp, R_inv, lambda, P, risk/<env>, extras."""
        row = {
            "loss": float(self.loss.detach()),
            "R_emp": self.risk,
            "R_inv": self.penalty,
            "lambda": self.weight,
            "P": self.weight * self.penalty,
        }
        row.update({f"risk/{k}": v for k, v in self.env_risks.items()})
        row.update(self.extras)
        return row


class Objective(Generic[HP]):
    """Base class, generic in its hyperparameter class. Subclasses set `name` and
    `hparams_class` (the `Hyperparameters` dataclass they are parametrised with:
    `class GroupDRO(Objective[GroupDROHyperparameters])`) and implement `__call__`; `hparams`,
    {config key: HParam}, is read from `hparams_class` when a subclass is defined. A subclass
    may instead set `hparams` alone (a dict of `HParam`s): its class is then made at run time
    (`hyperparameter_class`) and its `hp` attributes are Any to mypy.

    Args:
        env_names: training environment names; env id i in AnswerOutputs.env is env_names[i].
        **hparams: overrides of the declared hyperparameters (unknown names are an error).
    """

    name: ClassVar[str]
    label: ClassVar[str]
    """How tables, plots and verdicts name the method ("IRMv1")."""
    colour: ClassVar[str] = "C7"
    """Its colour in plots (a matplotlib colour: "C0".."C9")."""
    applies_to: ClassVar[frozenset[str]] = frozenset()
    """The experiments whose default method lists include it (of `EVERY_EXPERIMENT`: `tasks`
    fine-tunes a VLM on task types, `ladder` trains on the invariance ladder's rungs with the IRM
    paper's penalty schedule, `invariance` the linear unit tests); none: only where named."""
    hparams: ClassVar[dict[str, HParam]] = {}
    hparams_class: ClassVar[type[Hyperparameters]] = Hyperparameters
    batched: ClassVar[type[BatchedLoss[Any]] | None] = None
    """Its batched form, optional: the same loss for many one-output linear models at once
    (`objectives.linear_cell`), with which the linear unit tests train a cell's models together
    (`linear.batched`); None: they train one at a time. A subclass that redefines the loss
    (`__call__`) without declaring its own has none."""
    hp: HP

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        if "__call__" in vars(cls) and "batched" not in vars(cls):
            cls.batched = None  # the inherited form computes the parent's loss, not this one
        if "hparams" in vars(cls) and "hparams_class" not in vars(cls):
            cls.hparams_class = hyperparameter_class(f"{cls.__name__}Hyperparameters", cls.hparams)
        cls.hparams = cls.hparams_class.declared()

    def __init__(self, env_names: list[str], **hparams: Any):
        # an instance of the class this objective is parametrised with (a ClassVar cannot say so)
        self.hp = cast(HP, self.hparams_class.from_config(hparams, f"method '{self.name}'"))
        self.env_names = list(env_names)

    def __call__(self, out: AnswerOutputs, step: int) -> LossParts:
        raise NotImplementedError

    def resets_optimizer_at(self, step: int) -> bool:
        """True when the optimizer should be re-created before this step (IRM anneal)."""
        return False

    @classmethod
    def penalty_schedule(cls, anneal: int, weight: float) -> dict[str, Any] | None:
        """Its hyperparameters for the IRM paper's schedule (penalty weight 1 for `anneal` steps,
        then `weight`, the optimizer kept), as the invariance ladder trains every method: the
        schedule's keys this objective declares ({} for one without a penalty); None where the
        method has no such schedule (it is then left off the ladder)."""
        schedule = {"lambda": weight, "lambda_before": 1.0, "anneal_steps": anneal,
                    "reset_optimizer_at_anneal": False}
        return {key: value for key, value in schedule.items() if key in cls.hparams}

    def state_dict(self) -> dict[str, Any]:
        """Controller state saved in checkpoints (JSON-safe)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""
