"""Why a fixed penalty weight tuned on full batches collapses a mini-batch VLM to a constant
answer (README, "The invariance ladder"): on mini-batches the penalty of an exactly invariant
predictor is not zero but sampling noise, of order the loss variance over the batch size, while
a constant answer (a tie between the two candidates) has penalty exactly zero in every batch.
Multiplied by the IRM paper's 91257, the noise outweighs the risk by orders of magnitude."""

from __future__ import annotations

import math

import numpy as np
import torch

from robustvlm.models.outputs import AnswerOutputs
from robustvlm.objectives import build_objective

PAPER_WEIGHT = 91257.18613115903


def _batch(logits: torch.Tensor, targets: torch.Tensor) -> AnswerOutputs:
    n = len(targets)
    return AnswerOutputs(logits=logits, targets=targets, example=torch.arange(n),
                         env=(torch.arange(n) >= n // 2).long(), hidden=torch.zeros(n, 1),
                         classifier=torch.zeros(2, 1))


def test_the_minibatch_vrex_penalty_of_an_invariant_rule_is_noise_and_a_constant_answer_escapes_it():
    rng = np.random.default_rng(0)
    per_env, draws = 32, 4000
    # one rule for both environments (invariant by construction): logit margin 1.5, right 75% of the time
    vrex = build_objective("vrex", ["a", "b"], {"lambda": PAPER_WEIGHT, "anneal_steps": 0})
    penalties, risks, row_losses = [], [], []
    for _ in range(draws):
        right = rng.random(2 * per_env) < 0.75
        targets = torch.from_numpy(rng.integers(0, 2, 2 * per_env))
        sign = torch.from_numpy(np.where(right, 1.0, -1.0))
        margin = 1.5 * sign * (2 * targets.double() - 1)  # logit of class 1 minus class 0
        logits = torch.stack([-margin / 2, margin / 2], 1)
        parts = vrex(_batch(logits, targets), 0)
        penalties.append(parts.penalty)
        risks.append(parts.risk)
        row_losses.append(np.where(right, math.log1p(math.exp(-1.5)), math.log1p(math.exp(1.5))))
    sigma2 = np.var(np.concatenate(row_losses))
    # independent: Var_e over two envs = ((R_a - R_b) / 2)^2, mean Var(R_a - R_b) / 4 = sigma^2 / (2 n)
    expected = sigma2 / (2 * per_env)
    assert abs(np.mean(penalties) - expected) < 0.05 * expected
    assert PAPER_WEIGHT * np.mean(penalties) > 100 * np.mean(risks)  # the noise term dwarfs the risk
    assert 100.0 * np.mean(penalties) < 2 * np.mean(risks)  # at the ladder's VLM weight: the risk's order

    targets = torch.from_numpy(rng.integers(0, 2, 2 * per_env))
    tie = vrex(_batch(torch.zeros(2 * per_env, 2, dtype=torch.float64), targets), 0)
    irm = build_objective("irm", ["a", "b"], {"lambda": PAPER_WEIGHT, "anneal_steps": 0, "unbiased": False})
    assert tie.penalty == 0.0 and irm(_batch(torch.zeros(2 * per_env, 2, dtype=torch.float64), targets), 0).penalty == 0.0
    assert math.isclose(tie.risk, math.log(2))  # the constant answer: risk ln 2, no penalty in any batch
