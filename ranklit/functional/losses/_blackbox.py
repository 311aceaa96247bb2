"""AP loss through blackbox differentiation of the ranking (Rolínek et al., CVPR 2020).

The forward pass computes the exact AP from ranks obtained by sorting. The ranking is piecewise constant, so its true
gradient is zero almost everywhere; blackbox differentiation (Vlastelica et al., ICLR 2020) replaces it by the
gradient of a piecewise-linear interpolation: with ``r(s)`` the descending ranking (``argmin_r <s, r>`` over
permutations) and ``g = dL/dr``::

    dL/ds ~= -(r(s) - r(s + lam * g)) / lam

Ranks are normalised by the number of ranked items inside the blackbox (as in the authors' code), which sets the
scale at which ``lam`` acts; the AP itself is unaffected. Time ``O(Q N log N)``, memory ``O(Q N)``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ranklit._checks import check_in_range, check_positive
from ranklit.functional.losses.contract import check_score_masks, reduce_ap_loss, require_positive_queries
from ranklit.functional.reducers import Reducer

__all__ = ["blackbox_ap_loss", "descending_ranks"]


def descending_ranks(scores: Tensor, mask: Tensor) -> Tensor:
    """``rank(k) = #{j in mask: s_j >= s_k}`` for every masked entry of each row (ties count against ``k``; entries
    outside ``mask`` get 0). One sort per row: ``O(Q N log N)`` time, ``O(Q N)`` memory.

    >>> descending_ranks(torch.tensor([[0.2, 0.9, 0.2, 0.5]]), torch.tensor([[True, True, True, False]])).tolist()
    [[3.0, 1.0, 3.0, 0.0]]
    """
    values, order = torch.where(mask, scores, torch.full_like(scores, -torch.inf)).sort(dim=1)
    positions = torch.arange(scores.shape[1], device=scores.device).expand_as(values)
    run_starts = torch.ones_like(mask)
    run_starts[:, 1:] = values[:, 1:] != values[:, :-1]
    first_of_run = torch.where(run_starts, positions, torch.zeros_like(positions)).cummax(dim=1).values
    ranks = torch.empty_like(scores).scatter_(1, order, (scores.shape[1] - first_of_run).to(scores.dtype))
    return torch.where(mask, ranks, torch.zeros_like(ranks))


class _BlackBoxRanks(torch.autograd.Function):
    """Normalised descending ranks ``rank / |mask|`` with the blackbox backward."""

    @staticmethod
    def forward(ctx: Any, scores: Tensor, mask: Tensor, lam: float) -> Tensor:
        count = mask.sum(dim=1, keepdim=True).clamp(min=1).to(scores.dtype)
        ranks = descending_ranks(scores, mask) / count
        ctx.save_for_backward(scores, mask, ranks, count)
        ctx.lam = lam
        return ranks

    @staticmethod
    def backward(ctx: Any, grad_ranks: Tensor) -> tuple[Tensor, None, None]:
        scores, mask, ranks, count = ctx.saved_tensors
        perturbed = descending_ranks(scores + ctx.lam * grad_ranks, mask) / count
        return -(ranks - perturbed) / ctx.lam, None, None


def blackbox_ap_loss(
    scores: Tensor,
    positives: Tensor,
    valid: Tensor | None = None,
    *,
    lam: float = 4.0,
    margin: float = 0.02,
    reducer: str | Reducer = "mean",
    query_classes: Tensor | None = None,
) -> Tensor:
    """BlackBox AP loss (Rolínek et al., "Optimizing rank-based metrics with blackbox differentiation", CVPR 2020)::

        L = 1 - mean_q (1/R_q) sum_{k in P_q} rank+(k) / rank(k)      (exact ranks, H(0) = 1)

    with both rankings differentiated as blackboxes with interpolation strength ``lam``. Before ranking, scores are
    shifted by a random margin ``s - margin * |N(0, 1)| * (y - 1/2)`` (positives lowered, negatives raised, as in the
    authors' code), so the ranking must hold with a margin; pass ``margin=0`` for the plain loss (the module does
    so in eval mode). Queries without a positive are skipped (the terms ``1 - AP_q`` of the others go to the
    ``reducer``); the query is not in its own ranking
    ([spec §0][spec-conventions]).

    Args:
        scores: ``[Q, N]`` cosine similarities.
        positives: ``[Q, N]`` bool positives mask.
        valid: ``[Q, N]`` bool mask of each query's retrieval set (``None`` = all).
        lam: blackbox interpolation strength (4).
        margin: scale of the random score margin (0.02), ``>= 0``.
        reducer: ``"mean"``, ``"class_balanced"``, ``"active"``, ``"none"`` or a
            :class:`~ranklit.functional.Reducer`.
        query_classes: ``[Q]`` finest class of each query (needed by ``"class_balanced"``).

    Returns:
        Scalar loss in ``[0, 1)`` (``[Q]`` with ``reducer="none"``). Cost: time ``O(Q N log N)``, memory ``O(Q N)``.

    Example:
        >>> s = torch.tensor([[0.9, 0.1, 0.8]])
        >>> round(blackbox_ap_loss(s, torch.tensor([[True, False, True]]), margin=0.0).item(), 4)
        0.0
    """
    lam = check_positive("lam", lam)
    margin = check_in_range("margin", margin, 0.0, 2.0)
    valid = check_score_masks(scores, positives, valid)
    positives = positives & valid
    has_positive = require_positive_queries(positives)
    if margin > 0:
        scores = scores - margin * torch.randn_like(scores).abs() * (positives.to(scores.dtype) - 0.5)
    ranks = _BlackBoxRanks.apply(scores, valid, lam) * valid.sum(dim=1, keepdim=True)
    ranks_pos = _BlackBoxRanks.apply(scores, positives, lam) * positives.sum(dim=1, keepdim=True)
    ratio = torch.where(positives, ranks_pos / torch.where(positives, ranks, torch.ones_like(ranks)), 0.0)
    ap = ratio.sum(dim=1) / positives.sum(dim=1).clamp(min=1)
    return reduce_ap_loss(ap, has_positive, reducer, query_classes)
