"""The settings of an in-context evaluation: one value from the command line (`icl eval`,
`diagnose`) down to the per-query loop (`evaluation.in_context.evaluate_icl`).

Light on purpose (no numpy, no torch): the CLI reads its option defaults from here, so each
default is stated once.
"""

from __future__ import annotations

from dataclasses import dataclass

from robustvlm.errors import ConfigError

POLICIES = ("random", "same-domain", "cross-domain", "label-shift", "spurious")  # `evaluation.in_context`


@dataclass(frozen=True)
class InContextSettings:
    """What an in-context evaluation asks; checked when made (ConfigError).

    Attributes:
        shots: demonstrations per prompt, one cell per count (0: zero-shot, run once under the
            policy "zero-shot").
        policies: the demo policies (`POLICIES`) of the cells with shots > 0.
        n_per_env: query images per environment (domain), drawn without replacement.
        seed: seed of the queries, the demonstrations and the run's shifted-policy plan.
        n_skew_classes: how many classes `label-shift` demonstrations come from (checked
            against the data's classes by `evaluation.in_context.make_plan`).
        batch_size: prompts per generation call.
        max_new_tokens, repetition_penalty: greedy decoding of the answer (1.0: no penalty).
    """

    shots: tuple[int, ...] = (0, 1, 2, 4)
    policies: tuple[str, ...] = ("random",)
    n_per_env: int = 20
    seed: int = 0
    n_skew_classes: int = 2
    batch_size: int = 8
    max_new_tokens: int = 8
    repetition_penalty: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "shots", tuple(self.shots))
        object.__setattr__(self, "policies", tuple(self.policies))
        if not self.shots or any(isinstance(k, bool) or not isinstance(k, int) or k < 0 for k in self.shots):
            raise ConfigError(f"shots must be non-negative integers, got {list(self.shots)}")
        unknown = [p for p in self.policies if p not in POLICIES]
        if unknown or (not self.policies and any(k > 0 for k in self.shots)):
            raise ConfigError(f"unknown or missing demo policies {unknown}; choose from {', '.join(POLICIES)}")
        for name in ("n_per_env", "batch_size", "max_new_tokens"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")

    @property
    def most_shots(self) -> int:
        """The largest shot count (`diagnose`'s k: its settings ask 0 and k shots of one policy)."""
        return max(self.shots)


#: `icl eval`'s settings by default
DEFAULTS = InContextSettings()
#: `diagnose`'s in-context stage by default: 0 and 4 shots of same-domain demonstrations
DIAGNOSE_DEFAULTS = InContextSettings(shots=(0, 4), policies=("same-domain",))
