"""Model selection over a sweep, as DomainBed's `model_selection.py` defines it, and the colour rules.

A sweep trains every (method, hyperparameter draw, trial seed) and scores several checkpoints of
each run on two parts of every environment: `val`, the held-out part (DomainBed's "out" split),
and `test`, the reported part ("in" split; for a training environment, its own test records).
Selection happens per (method, trial seed), as in DomainBed's results tables:

- **training-domain validation** (DomainBed's `IIDAccuracySelectionMethod`): among every draw and
  checkpoint, the one with the highest held-out accuracy averaged over the training
  environments; its test accuracy is reported for every environment. The test environments are
  never looked at.
- **test-domain validation, the oracle** (DomainBed's `OracleSelectionMethod`): for each test
  environment separately, the last checkpoint of every draw (no early stopping), and the draw with
  the highest accuracy on that test environment's held-out part; its accuracy on the environment's
  reported part is the result. It looks at the test distribution, so it is an upper bound on what
  a practitioner could select, never a result of the method alone.

Ties go to the lower draw, then (training-domain validation) to the later checkpoint.
Over trial seeds, every figure is the mean with DomainBed's standard error (std with ddof 0 over
sqrt(seeds)). Worst-environment accuracy (the WILDS / DomainBed convention) is taken per seed and
then averaged. Pure functions: no file or model I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from robustvlm.errors import DataError

READINGS = ("final", "training-domain", "oracle")
"""How a run's checkpoints are read, as results files name them: its last step, the one
training-domain validation picks, and per test environment the oracle's."""
TRAINING_DOMAIN = "training-domain validation"
ORACLE = "test-domain validation (oracle)"
RULES = (TRAINING_DOMAIN, ORACLE)


@dataclass(frozen=True)
class CheckpointScores:
    """Accuracy of one checkpoint of one run.

    Attributes:
        method: the method's label; draw: the hyperparameter draw (0 = defaults); seed: the trial
            seed; step: the checkpoint's optimizer step.
        val: {environment: accuracy on its held-out part}.
        test: {environment: accuracy on its reported part}.
    """

    method: str
    draw: int
    seed: int
    step: int
    val: dict[str, float]
    test: dict[str, float]

    def to_dict(self) -> dict:
        return {
            "method": self.method,
            "draw": self.draw,
            "seed": self.seed,
            "step": self.step,
            "val": self.val,
            "test": self.test,
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> CheckpointScores:
        return cls(
            d["method"],
            int(d["draw"]),
            int(d["seed"]),
            int(d["step"]),
            dict(d["val"]),
            dict(d["test"]),
        )


@dataclass(frozen=True)
class Choice:
    """What one selection rule picked for one (method, trial seed) (and, for the oracle, one test
    environment): the draw, the checkpoint step, the selection score and the reported accuracies."""

    draw: int
    step: int
    score: float
    test: dict[str, float]

    def to_dict(self) -> dict:
        return {"draw": self.draw, "step": self.step, "score": self.score, "test": self.test}


@dataclass(frozen=True)
class MeanSE:
    """Mean over trial seeds with DomainBed's standard error (std ddof 0 / sqrt(n)); n seeds."""

    mean: float
    se: float
    n: int

    def to_dict(self) -> dict:
        return {"mean": self.mean, "se": self.se, "n": self.n}


def mean_se(values: Iterable[float]) -> MeanSE:
    """MeanSE of the values (one per trial seed)."""
    v = np.asarray(list(values), dtype=float)
    if v.size == 0:
        raise DataError("mean_se needs at least one value")
    return MeanSE(float(v.mean()), float(v.std() / np.sqrt(v.size)), int(v.size))


def _pick(candidates: Sequence[tuple[float, int, int, dict[str, float]]]) -> Choice:
    """The highest score; ties to the lower draw, then the later step."""
    score, draw, step, test = max(candidates, key=lambda c: (c[0], -c[1], c[2]))
    return Choice(draw, step, score, dict(test))


def training_domain_choice(runs: Sequence[CheckpointScores], train_envs: Sequence[str]) -> Choice:
    """Training-domain validation over every draw and checkpoint of one (method, trial seed)."""
    if not runs or not train_envs:
        raise DataError("training-domain validation needs checkpoints and training environments")
    return _pick(
        [(float(np.mean([r.val[e] for e in train_envs])), r.draw, r.step, r.test) for r in runs]
    )


def oracle_choice(runs: Sequence[CheckpointScores], test_env: str) -> Choice:
    """Test-domain validation of one (method, trial seed) on `test_env`: last checkpoint of every
    draw, the draw with the best held-out accuracy on `test_env`. The result is its accuracy on
    `test_env`; the Choice keeps the picked model's other accuracies, to say what it learned."""
    last: dict[int, CheckpointScores] = {}
    for r in runs:
        if r.draw not in last or r.step > last[r.draw].step:
            last[r.draw] = r
    if not last:
        raise DataError("the oracle selection needs checkpoints")
    return _pick([(r.val[test_env], d, r.step, r.test) for d, r in last.items()])


@dataclass(frozen=True)
class MethodSelection:
    """One method under one selection rule.

    Attributes:
        rule: TRAINING_DOMAIN or ORACLE.
        choices: {trial seed: {environment: Choice}}; under training-domain validation every
            environment maps to the seed's one Choice, under the oracle each test environment
            has its own.
        per_env: {environment: MeanSE over seeds of the selected accuracy} (the oracle: test
            environments only).
        test_mean: the macro mean over the test environments (per seed, then over seeds).
        test_worst: the lowest test-environment accuracy (per seed, then over seeds).
        worst_all: the lowest accuracy over every environment, training ones included
            (training-domain validation only; None under the oracle).
    """

    rule: str
    choices: dict[int, dict[str, Choice]]
    per_env: dict[str, MeanSE]
    test_mean: MeanSE
    test_worst: MeanSE
    worst_all: MeanSE | None

    def to_dict(self) -> dict:
        return {
            "rule": self.rule,
            "choices": {
                str(s): {e: c.to_dict() for e, c in by.items()} for s, by in self.choices.items()
            },
            "per_env": {e: v.to_dict() for e, v in self.per_env.items()},
            "test_mean": self.test_mean.to_dict(),
            "test_worst": self.test_worst.to_dict(),
            "worst_all": self.worst_all.to_dict() if self.worst_all else None,
        }


def _summarize(
    rule: str,
    accs: Mapping[int, Mapping[str, float]],
    choices: dict[int, dict[str, Choice]],
    test_envs: Sequence[str],
    all_envs: Sequence[str] | None,
) -> MethodSelection:
    seeds = sorted(accs)
    envs = list(all_envs) if all_envs is not None else list(test_envs)
    return MethodSelection(
        rule=rule,
        choices=choices,
        per_env={e: mean_se(accs[s][e] for s in seeds) for e in envs},
        test_mean=mean_se(float(np.mean([accs[s][e] for e in test_envs])) for s in seeds),
        test_worst=mean_se(min(accs[s][e] for e in test_envs) for s in seeds),
        worst_all=None
        if all_envs is None
        else mean_se(min(accs[s][e] for e in envs) for s in seeds),
    )


def select_method(
    runs: Sequence[CheckpointScores], train_envs: Sequence[str], test_envs: Sequence[str]
) -> dict[str, MethodSelection]:
    """{rule: MethodSelection} of one method's checkpoints (every draw and trial seed)."""
    by_seed: dict[int, list[CheckpointScores]] = {}
    for r in runs:
        by_seed.setdefault(r.seed, []).append(r)
    all_envs = [*train_envs, *test_envs]
    td_choices, td_accs, or_choices, or_accs = {}, {}, {}, {}
    for seed, seed_runs in sorted(by_seed.items()):
        choice = training_domain_choice(seed_runs, train_envs)
        td_choices[seed] = dict.fromkeys(all_envs, choice)
        td_accs[seed] = {e: choice.test[e] for e in all_envs}
        or_choices[seed] = {e: oracle_choice(seed_runs, e) for e in test_envs}
        or_accs[seed] = {e: c.test[e] for e, c in or_choices[seed].items()}
    return {
        TRAINING_DOMAIN: _summarize(TRAINING_DOMAIN, td_accs, td_choices, test_envs, all_envs),
        ORACLE: _summarize(ORACLE, or_accs, or_choices, test_envs, None),
    }


def select_sweep(
    runs: Sequence[CheckpointScores], train_envs: Sequence[str], test_envs: Sequence[str]
) -> dict[str, dict[str, MethodSelection]]:
    """{method: {rule: MethodSelection}}, methods in the order they first appear in `runs`."""
    if not runs:
        raise DataError("select_sweep: no checkpoint scores")
    if not test_envs:
        raise DataError("select_sweep: no test environment")
    methods: dict[str, list[CheckpointScores]] = {}
    for r in runs:
        methods.setdefault(r.method, []).append(r)
    return {m: select_method(rs, train_envs, test_envs) for m, rs in methods.items()}


# ---------------------------------------------------------------- which rule a model learned

COLOUR = "colour"
ANTI_COLOUR = "anti-colour"
SHAPE = "content (invariant)"
CONSTANT = "constant (chance)"
NO_ANSWER = "no valid answer"


def colour_rule_prototypes(
    agreement: Mapping[str, float], label_noise: float
) -> dict[str, dict[str, float]]:
    """Per-environment accuracy of each pure rule on a ColoredMNIST-style benchmark.

    Args:
        agreement: {environment: P(background colour agrees with the noisy answer)}.
        label_noise: P(the answer is flipped from the image content).

    Returns:
        {rule: {environment: accuracy}}: the colour rule scores the agreement, the anti-colour
        rule its complement, the content (shape / digit) rule 1 - label_noise everywhere, a
        constant answer 0.5 (balanced answers), a model that gives neither answer 0.
    """
    return {
        COLOUR: {e: float(p) for e, p in agreement.items()},
        ANTI_COLOUR: {e: 1.0 - float(p) for e, p in agreement.items()},
        SHAPE: {e: 1.0 - float(label_noise) for e in agreement},
        CONSTANT: dict.fromkeys(agreement, 0.5),
        NO_ANSWER: dict.fromkeys(agreement, 0.0),
    }


@dataclass(frozen=True)
class RuleCall:
    """The pure rule nearest to measured per-environment accuracies, and every rule's distance."""

    rule: str
    distances: dict[str, float]


def nearest_rule(
    accuracy: Mapping[str, float], prototypes: Mapping[str, Mapping[str, float]]
) -> RuleCall:
    """The rule whose per-environment accuracies are nearest (Euclidean, over the environments of
    `accuracy`) to the measured ones."""
    envs = list(accuracy)
    distances = {
        rule: float(np.sqrt(sum((accuracy[e] - proto[e]) ** 2 for e in envs)))
        for rule, proto in prototypes.items()
    }
    return RuleCall(min(distances, key=lambda r: distances[r]), distances)


def rule_calls(
    selection: Mapping[str, Mapping[str, MethodSelection]],
    prototypes: Mapping[str, Mapping[str, float]],
) -> dict[str, dict[str, RuleCall]]:
    """{method: {"mean" | seed: RuleCall}}: the rule nearest to each method's per-environment
    accuracy under training-domain validation, of the seed mean and of every seed.

    Only environments that every prototype names are compared; without prototypes (data with no
    colour manifest) there is nothing to compare and the result is empty.
    """
    out: dict[str, dict[str, RuleCall]] = {}
    if not prototypes:
        return out
    for label, by_rule in selection.items():
        td = by_rule[TRAINING_DOMAIN]
        envs = [e for e in td.per_env if all(e in p for p in prototypes.values())]
        if not envs:
            continue
        calls = {"mean": nearest_rule({e: td.per_env[e].mean for e in envs}, prototypes)}
        for seed, choice in td.choices.items():
            calls[str(seed)] = nearest_rule({e: choice[e].test[e] for e in envs}, prototypes)
        out[label] = calls
    return out


def oracle_rule_calls(
    selection: Mapping[str, Mapping[str, MethodSelection]],
    prototypes: Mapping[str, Mapping[str, float]],
) -> dict[str, dict[str, dict[str, RuleCall]]]:
    """{method: {test environment: {seed: RuleCall}}}: the rule nearest to the per-environment
    accuracies of the model the oracle picked for that environment and seed ({} without
    prototypes)."""
    out: dict[str, dict[str, dict[str, RuleCall]]] = {}
    if not prototypes:
        return out
    for label, by_rule in selection.items():
        for seed, by_env in by_rule[ORACLE].choices.items():
            for env, choice in by_env.items():
                envs = [e for e in choice.test if all(e in p for p in prototypes.values())]
                if envs:
                    call = nearest_rule({e: choice.test[e] for e in envs}, prototypes)
                    out.setdefault(label, {}).setdefault(env, {})[str(seed)] = call
    return out


@dataclass(frozen=True)
class SweepResults:
    """A finished sweep: what ran, the two selections side by side, and the rules learned.

    Attributes:
        methods: {label: objective name}.
        draws: {label: {draw: {"lr", "weight_decay", "method_args"}}} (the trial seed's own
            `seed` hyperparameter, where a method has one, is not listed).
        seeds: trial seeds; checkpoints: the evaluated steps.
        train_envs, test_envs: the environments trained on and the test environments.
        metric: the accuracy (a per-example metric of the registry, e.g. exact match).
        holdout_fraction: the held-out part of each environment (see `data.carve.hold_out`).
        selection: {label: {rule: MethodSelection}}.
        rules: {label: {"mean" | seed: RuleCall}} where the benchmark has colour prototypes.
        oracle_rules: {label: {test env: {seed: RuleCall}}} of the oracle's picks, likewise.
        headline_env: the environment the report leads with (e.g. the colour-free one).
        reference: published figures printed beside ours (a packaged configs/reference YAML:
            {"source", "dataset", "env", "note", "results": {their method: {rule: value in %}},
            "objectives": {our method: their method}}, plus the sweep's `env`), or None.
        n_runs: runs trained; smoke: a smoke test (a tiny stand-in), not a result.
    """

    methods: dict[str, str]
    draws: dict[str, dict[int, dict]]
    seeds: list[int]
    checkpoints: list[int]
    train_envs: list[str]
    test_envs: list[str]
    metric: str
    holdout_fraction: float
    selection: dict[str, dict[str, MethodSelection]]
    rules: dict[str, dict[str, RuleCall]]
    oracle_rules: dict[str, dict[str, dict[str, RuleCall]]] = field(default_factory=dict)
    headline_env: str | None = None
    reference: dict | None = None
    n_runs: int = 0
    smoke: bool = False

    def to_dict(self) -> dict:
        """The results.json content."""
        return {
            "smoke": self.smoke,
            "methods": self.methods,
            "draws": {m: {str(d): h for d, h in by.items()} for m, by in self.draws.items()},
            "seeds": self.seeds,
            "checkpoints": self.checkpoints,
            "train_envs": self.train_envs,
            "test_envs": self.test_envs,
            "metric": self.metric,
            "holdout_fraction": self.holdout_fraction,
            "n_runs": self.n_runs,
            "selection": {
                m: {rule: s.to_dict() for rule, s in by.items()} for m, by in self.selection.items()
            },
            "rules": {
                m: {k: {"rule": c.rule, "distances": c.distances} for k, c in by.items()}
                for m, by in self.rules.items()
            },
            "oracle_rules": {
                m: {e: {s: c.rule for s, c in by_seed.items()} for e, by_seed in by.items()}
                for m, by in self.oracle_rules.items()
            },
            "headline_env": self.headline_env,
            "reference": self.reference,
        }
