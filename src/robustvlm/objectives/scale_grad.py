"""Closed-form gradients of the token risk w.r.t. classifier scales.

IRMv1 and BIRM penalise d/dw CE(w * z, y), the gradient of a token's cross-entropy with
respect to a scale w on its logits z [V]. Both closed forms below are differentiable w.r.t.
the logits by a hand-written backward, so the penalty back-propagates through the network
with one ordinary backward (no `create_graph`, no double backward through the network).
For the squared-error risk of a one-output regression (`AnswerOutputs.risk == "squared"`)
the gradient is d/dw (w z - y)^2 = 2 (w z - y) z, an ordinary differentiable expression.

With p = softmax(w * z) (scalar w) or p = softmax(w ⊙ z) (one scale per vocabulary entry):

    scalar:  g(w)   = sum_k p_k z_k - z_y
    vocab:   g_k(w) = p_k z_k - 1[k = y] z_k

The scalar form also returns the token cross-entropy from the same pass, so the logits get
one gradient buffer. Only the logits are kept for backward (the probabilities are recomputed
in row chunks), so the extra memory is a few chunk-sized buffers, whatever the number of draws.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.autograd.function import FunctionCtx, once_differentiable

from robustvlm.models.outputs import AnswerOutputs

CHUNK_ELEMENTS = 1 << 21
"""Upper bound on the elements of one working buffer (8 MiB in float32)."""


def _row_chunks(n_rows: int, per_row: int) -> Iterator[slice]:
    """Consecutive row slices whose buffers hold at most CHUNK_ELEMENTS elements."""
    step = max(1, CHUNK_ELEMENTS // max(1, per_row))
    for start in range(0, n_rows, step):
        yield slice(start, min(n_rows, start + step))


def _work_dtype(logits: torch.Tensor) -> torch.dtype:
    """float32 at least, float64 when the logits are float64."""
    return torch.promote_types(logits.dtype, torch.float32)


WIDE_VOCAB = 4096
"""From this many classes on, `_draw_probabilities` calls torch.softmax (see there)."""


def _draw_probabilities(z: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """p[r, s, :] = softmax(w_s z_r) for every row r and draw s: [r, S, V].

    Args:
        z: [r, V] logits; w: [r, S] scales.

    On CPU torch.softmax is 20-30% faster than exp-and-normalise from a vocabulary of about
    4096 on, and 2-3x slower below it (measured ad hoc with torch 2.13 on a 2-core CPU, not kept
    as a benchmark), so the short
    case shifts by the row maximum of w_s z by hand (w_s max z for w_s >= 0, w_s min z
    otherwise: no pass over the products) and normalises.
    """
    products = torch.mul(w.unsqueeze(2), z.unsqueeze(1))
    if z.shape[1] >= WIDE_VOCAB:
        return torch.softmax(products, dim=-1)
    low, high = torch.aminmax(z, dim=-1)
    shift = torch.where(w >= 0, w * high.unsqueeze(1), w * low.unsqueeze(1))  # [r, S]
    e = products.sub_(shift.unsqueeze(2)).exp_()
    return e.div_(e.sum(-1, keepdim=True))


class _CEAndScaleGrads(torch.autograd.Function):
    """Token cross-entropy and g[i, s] = d/dw CE(w * z_i, y_i) at w = 1 and at w = scales[i, s].

    Column 0 of the scales is w = 1, so the cross-entropy comes from the same pass
    (CE = max z - log max_k p_k - z_y, exact and stable since max_k p_k >= 1/V) and the logits
    receive a single gradient buffer. With p = softmax(w z) and mu = E_p[z]: g = mu - z_y.
    Backward: dg/dz_j = p_j (1 + w (z_j - mu)) - 1[j = y] and dCE/dz_j = p_j - 1[j = y] at w = 1,
    so the gradient is sum_s p_s (a_s + b_s z) - (sum_s c_s + d) 1[j = y] with
    a_s = c_s (1 - w_s mu_s) (+ d for s = 0) and b_s = c_s w_s, for upstream c_s (of g_s) and
    d (of CE). Every draw is handled in one pass over the logits: a row chunk holds the
    probabilities of all draws, [rows, 1 + S, V] (at most CHUNK_ELEMENTS, or one row), reduced
    over the vocabulary in forward and mixed over the draws by one batched matrix product in
    backward. They are recomputed in backward, so nothing [N, V]-sized is kept. The cost is
    2 (1 + S) softmax passes over the logits, as with one softmax per draw, with a fixed number
    of operations per chunk instead of a few per draw.
    """

    @staticmethod
    def forward(
        ctx: FunctionCtx, logits: torch.Tensor, targets: torch.Tensor, scales: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        ctx.set_materialize_grads(False)  # an unused output (the penalty off) gets None
        dtype = _work_dtype(logits)
        scales = torch.cat([scales.new_ones(scales.shape[0], 1), scales], dim=1).to(dtype)
        mean_z = torch.empty(scales.shape, dtype=dtype, device=logits.device)
        top_p = torch.empty(scales.shape[0], dtype=dtype, device=logits.device)
        for rows in _row_chunks(logits.shape[0], scales.shape[1] * logits.shape[1]):
            z = logits[rows].to(dtype)  # [r, V]
            p = _draw_probabilities(z, scales[rows])  # [r, 1 + S, V]
            top_p[rows] = p[:, 0].amax(-1)
            mean_z[rows] = torch.linalg.vecdot(p, z.unsqueeze(1))
        ctx.save_for_backward(logits, targets, scales, mean_z)
        target_logit = logits.gather(1, targets[:, None]).to(dtype)  # [N, 1]
        ce = logits.amax(1).to(dtype) - top_p.log() - target_logit[:, 0]
        return ce, mean_z - target_logit

    @staticmethod
    @once_differentiable
    def backward(
        ctx: FunctionCtx, grad_ce: torch.Tensor | None, grad_g: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, None, None]:
        logits, targets, scales, mean_z = ctx.saved_tensors  # type: ignore[attr-defined]  # torch stubs: FunctionCtx lacks it
        if grad_ce is None and grad_g is None:
            return None, None, None
        dtype = _work_dtype(logits)
        if grad_g is None:  # the penalty is out of the loss (a warm-up): w = 1 alone, one softmax
            scales, mean_z = scales[:, :1], mean_z[:, :1]
            grad_g = torch.zeros_like(mean_z)
        grad_ce = torch.zeros_like(mean_z[:, 0]) if grad_ce is None else grad_ce.to(dtype)
        grad_g = grad_g.to(dtype)
        coef_a = grad_g * (1.0 - scales * mean_z)  # [N, 1 + S]
        coef_a[:, 0] += grad_ce
        coef = torch.stack([coef_a, grad_g * scales], dim=1)  # [N, 2, 1 + S]
        at_target = -(grad_g.sum(1) + grad_ce).unsqueeze(1)  # [N, 1]
        grad_logits = torch.empty_like(logits)
        for rows in _row_chunks(logits.shape[0], scales.shape[1] * logits.shape[1]):
            z = logits[rows].to(dtype)
            mixed = torch.bmm(coef[rows], _draw_probabilities(z, scales[rows]))  # [r, 2, V]
            block = torch.addcmul(mixed[:, 0], mixed[:, 1], z)
            block.scatter_add_(1, targets[rows, None], at_target[rows])
            grad_logits[rows] = block.to(logits.dtype)
        return grad_logits, None, None


class _VocabScaleGradSums(torch.autograd.Function):
    """sums[g, s, k] = sum over tokens i of group g of d/dw_k CE(w ⊙ z_i, y_i) at w = scales[g, s]."""

    @staticmethod
    def forward(
        ctx: FunctionCtx,
        logits: torch.Tensor,
        targets: torch.Tensor,
        group: torch.Tensor,
        scales: torch.Tensor,
    ) -> torch.Tensor:
        dtype = _work_dtype(logits)
        sums = torch.zeros(scales.shape, dtype=dtype, device=logits.device)
        for rows in _row_chunks(logits.shape[0], scales.shape[1] * logits.shape[1]):
            z = logits[rows].to(dtype).unsqueeze(1)  # [r, 1, V]
            w = scales[group[rows]].to(dtype)  # [r, S, V]
            contrib = torch.softmax(w * z, dim=-1).mul_(z)
            y = targets[rows, None, None].expand(-1, w.shape[1], 1)
            contrib.scatter_add_(2, y, -z.expand_as(w).gather(2, y))
            sums.index_add_(0, group[rows], contrib)
        ctx.save_for_backward(logits, targets, group, scales)
        return sums

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, grad_sums: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        # (J^T c)_j = p_j (c_j + w_j (c_j z_j - sum_k c_k z_k p_k)) - c_y 1[j = y]
        logits, targets, group, scales = ctx.saved_tensors  # type: ignore[attr-defined]  # torch stubs: FunctionCtx lacks it
        dtype = _work_dtype(logits)
        grad_logits = torch.zeros_like(logits)
        for rows in _row_chunks(logits.shape[0], scales.shape[1] * logits.shape[1]):
            z = logits[rows].to(dtype).unsqueeze(1)  # [r, 1, V]
            w = scales[group[rows]].to(dtype)  # [r, S, V]
            c = grad_sums[group[rows]].to(dtype)  # [r, S, V]
            p = torch.softmax(w * z, dim=-1)
            cz = c * z
            inner = (cz * p).sum(-1, keepdim=True)
            block = cz.sub_(inner).mul_(w).add_(c).mul_(p).sum(1)  # [r, V]
            y = targets[rows, None]
            block.scatter_add_(1, y, -c.sum(1).gather(1, y))
            grad_logits[rows] = block.to(logits.dtype)
        return grad_logits, None, None, None


def ce_and_scale_grads(
    logits: torch.Tensor, targets: torch.Tensor, scales: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token cross-entropy and its gradient w.r.t. one scalar scale on the logits.

    Args:
        logits: [N, V] logits z.
        targets: [N] long, the target class y of each row.
        scales: [N, S] scale values w at which to evaluate, S >= 0 draws per row (no gradient).

    Returns:
        ce: [N] CE(z_i, y_i) (nats).
        grads: [N, 1 + S]; column 0 is d/dw CE(w z_i, y_i) at w = 1, column 1 + s at
        w = scales[i, s] (each E_{softmax(w z_i)}[z_i] - z_{i, y_i}).
        Both are differentiable w.r.t. the logits (one gradient buffer for the two).
    """
    return _CEAndScaleGrads.apply(logits, targets, scales.detach())


def vocab_scale_grad_sums(
    logits: torch.Tensor, targets: torch.Tensor, group: torch.Tensor, scales: torch.Tensor
) -> torch.Tensor:
    """Per-group sums of the gradient of cross-entropy w.r.t. per-vocabulary-entry scales.

    Args:
        logits: [N, V] logits z.
        targets: [N] long, the target class y of each row.
        group: [N] long in [0, G), the group (environment) of each row.
        scales: [G, S, V] scale vectors w, S draws per group (no gradient).

    Returns:
        [G, S, V] tensor: sum over the rows i of group g of d/dw CE(w ⊙ z_i, y_i) at
        w = scales[g, s] (entry k: p_k z_k - 1[k = y] z_k), differentiable w.r.t. the logits.
    """
    return _VocabScaleGradSums.apply(logits, targets, group, scales.detach())


def squared_and_scale_grads(
    predictions: torch.Tensor, targets: torch.Tensor, scales: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token squared error and its gradient w.r.t. one scalar scale on the prediction.

    Args:
        predictions: [N] predictions z.
        targets: [N] real targets y.
        scales: [N, S] scale values w at which to evaluate, S >= 0 draws per row (no gradient).

    Returns:
        loss: [N] (z_i - y_i)^2 (target units squared).
        grads: [N, 1 + S]; column 0 is d/dw (w z_i - y_i)^2 at w = 1, column 1 + s at
        w = scales[i, s] (each 2 (w z_i - y_i) z_i). Both differentiable w.r.t. the predictions.
    """
    z, y = predictions.unsqueeze(1), targets.unsqueeze(1).to(predictions.dtype)
    w = torch.cat([scales.new_ones(scales.shape[0], 1), scales.detach()], dim=1).to(z.dtype)
    return (z[:, 0] - y[:, 0]).square(), 2.0 * (w * z - y) * z


def risk_and_scale_grads(out: AnswerOutputs, scales: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`out.token_risk()` [N] and its scale gradients [N, 1 + S] at w = 1 and at `scales` [N, S].

    Cross-entropy (`ce_and_scale_grads`) or squared error (`squared_and_scale_grads`), as
    `out.risk` says.
    """
    if out.risk == "squared":
        return squared_and_scale_grads(out.logits[:, 0], out.targets, scales)
    return ce_and_scale_grads(out.logits, out.targets, scales)


def shift_grads(out: AnswerOutputs) -> torch.Tensor:
    """d risk / d b at b = 0 for a shift b added to the last logit: [N], differentiable.

    The linear unit tests' IRMv1 (`dummy_sum`, on a one-output model whose logits here are
    [0, f]): softmax(z)_last - 1[y = last] for cross-entropy, 2 (z - y) for the squared error.
    The softmax spans the vocabulary, so this is meant for small output spaces.
    """
    if out.risk == "squared":
        return 2.0 * (out.logits[:, 0] - out.targets)
    last = out.logits.shape[1] - 1
    return torch.softmax(out.logits.float(), dim=-1)[:, last] - (out.targets == last).float()
