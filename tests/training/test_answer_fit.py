"""The VLM rungs' answer training (`training.answer_fit`, `models.outputs.restrict_to_candidates`)
against independent computations."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from robustvlm.experiments.ladder.rung import Rung
from robustvlm.experiments.ladder.vlm import answer_rows, build_vlm
from robustvlm.models.answer import AnswerModel
from robustvlm.models.outputs import AnswerOutputs, restrict_to_candidates
from robustvlm.objectives import build_objective
from robustvlm.training.answer_fit import candidate_correct, fit_answer

V = 9


def test_restricted_outputs_give_the_binary_irm_penalty_of_the_logit_difference():
    g = torch.Generator().manual_seed(0)
    candidates = torch.tensor([4, 7])
    # four examples: answer word (a candidate), then the end-of-turn token 2
    targets = torch.tensor([4, 2, 7, 2, 7, 2, 4, 2])
    example = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    logits = (2 * torch.randn(8, V, generator=g, dtype=torch.float64)).requires_grad_()
    out = AnswerOutputs(logits=logits, targets=targets, example=example, env=torch.tensor([0, 0, 0, 0, 1, 1, 1, 1]),
                        hidden=torch.randn(8, 3, generator=g), classifier=torch.randn(V, 3, generator=g))
    small = restrict_to_candidates(out, candidates)
    answer = targets != 2
    assert torch.equal(small.targets, torch.tensor([0, 1, 1, 0]))
    assert torch.equal(small.example, torch.tensor([0, 1, 2, 3])) and torch.equal(small.env, torch.tensor([0, 0, 1, 1]))
    assert torch.equal(small.classifier, out.classifier[candidates])
    # the IRM paper's penalty: the logistic loss of f = z_large - z_small, per environment
    # (dR/dw at w = 1)^2 with R(w) = mean BCE(w f, y), averaged over the two environments
    f = logits[answer][:, 7] - logits[answer][:, 4]
    y = (targets[answer] == 7).double()
    expected = []
    for e in (0, 1):
        w = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
        risk = F.binary_cross_entropy_with_logits(w * f[2 * e:2 * e + 2], y[2 * e:2 * e + 2])
        expected.append(torch.autograd.grad(risk, w, create_graph=True)[0].square())
    parts = build_objective("irm", ["a", "b"], {"unbiased": False, "lambda": 10.0, "anneal_steps": 0})(small, 0)
    reference = F.binary_cross_entropy_with_logits(f, y) + 10.0 * torch.stack(expected).mean()
    torch.testing.assert_close(parts.loss, reference)
    ours, = torch.autograd.grad(parts.loss, logits)
    theirs, = torch.autograd.grad(reference, logits)
    torch.testing.assert_close(ours, theirs)


def _rows(processor, n: int, seed: int):
    rng = np.random.default_rng(seed)
    inputs = rng.random((n, 2 * 14 * 14)).astype(np.float32)
    labels = rng.integers(0, 2, n)
    return answer_rows(processor, "mnist", inputs, labels, {"train-0.9": 0, "train-0.8": 1}, "train-0.9"), labels


def test_candidate_correct_scores_the_first_answer_token_and_fit_answer_trains_the_head_only():
    torch.manual_seed(0)
    vlm, processor = build_vlm(Rung.parse("vlm:head:tiny:idefics3"), 0, "mnist", 16)
    rows, labels = _rows(processor, 6, 0)
    model = AnswerModel(vlm)
    correct = candidate_correct(model, rows, batch_size=4)
    with torch.no_grad():  # independent: the full-vocabulary logits of the `labels=` forward
        logits = vlm(**{k: v for k, v in rows.batch.items() if k not in ("labels", "env")}).logits
    first = (rows.batch["labels"] != -100).int().argmax(1) - 1  # position predicting the answer word
    picked = logits[torch.arange(len(labels)), first][:, rows.candidates].argmax(1).numpy()
    np.testing.assert_array_equal(correct, picked == labels)

    trainable = {n: p.detach().clone() for n, p in vlm.named_parameters() if p.requires_grad}
    frozen = {n: p.detach().clone() for n, p in vlm.named_parameters() if not p.requires_grad}
    assert trainable and all("connector" in n or "layers.1." in n for n in trainable)
    steps = []
    other, _ = _rows(processor, 6, 1)
    fit_answer(build_objective("vrex", ["train-0.9", "train-0.8"]), vlm, [rows, other], steps=4, lr=1e-2,
               batch_size=4, seed=0, candidates_only=True, eval_every=2, on_eval=lambda s, m: steps.append(s))
    assert steps == [2, 4]
    params = dict(vlm.named_parameters())
    assert all(torch.equal(params[n], v) for n, v in frozen.items())
    assert any(not torch.equal(params[n], v) for n, v in trainable.items())
