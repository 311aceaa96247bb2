"""Pair-based hinge losses on cosine similarities: ROADMAP's calibration loss and the contrastive (pair) loss.

Both push each positive pair above a threshold and each negative pair below another one; they differ only in the
reduction (per-query means for the calibration loss, per-query sums for the contrastive loss). Time and memory
``O(Q N)``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ranklit.functional.losses.contract import check_score_masks, require_positive_queries
from ranklit.functional.losses.hyperparameters import check_margins, check_reduction
from ranklit.functional.reducers import Reducer, get_reducer

__all__ = ["calibration_loss", "contrastive_loss"]

def calibration_loss(
    scores: Tensor,
    positives: Tensor,
    valid: Tensor | None = None,
    *,
    alpha: float = 0.9,
    beta: float = 0.6,
    reduction: str = "query",
    reducer: str | Reducer = "mean",
    query_classes: Tensor | None = None,
) -> Tensor:
    """Calibration loss (Ramzi et al., ROADMAP, NeurIPS 2021, Eq. 7)::

        reduction="query" (the paper, default):
        L = mean_q [ (1/|P_q|) sum_{j in P_q} [alpha - s_j]_+  +  (1/|N_q|) sum_{j in N_q} [s_j - beta]_+ ]

        reduction="batch_active" (the authors' released code):
        L = sum_{(q,j) in P} [alpha - s_qj]_+ / #{(q,j) in P: active}  +  sum_{(q,j) in N} [s_qj - beta]_+ / #{N active}

    With ``"query"``, queries without a positive are skipped and a query without a negative has a zero negative term;
    the per-query terms go to the ``reducer`` (``"mean"``: the formula above).
    ``"batch_active"`` is what the ROADMAP code computes (pytorch-metric-learning's ``ContrastiveLoss(pos_margin=alpha,
    neg_margin=beta)`` on cosine similarities with its ``AvgNonZeroReducer``): each hinge term is averaged over the
    pairs of the **whole batch** where it is active (non-zero), then the two are added; a term with no active pair
    is 0, and every pair of the retrieval set counts, including those of queries without a positive: a batch without
    any positive pair gives the negative term alone, as the released code does (where ``"query"`` raises).

    Args:
        scores: ``[Q, N]`` cosine similarities.
        positives: ``[Q, N]`` bool positives mask.
        valid: ``[Q, N]`` bool mask of the items in each query's retrieval set (``None`` = all).
        alpha: positives are pushed above ``alpha`` (0.9). beta: negatives below ``beta`` (0.6).
        reduction: ``"query"`` (paper's Eq. 7) or ``"batch_active"`` (authors' code, a mean over pairs: only with
            ``reducer="mean"``).
        reducer: what the per-query terms of ``"query"`` go to: ``"mean"``, ``"class_balanced"``, ``"active"``,
            ``"none"`` or a :class:`~ranklit.functional.Reducer`.
        query_classes: ``[Q]`` finest class of each query (needed by ``"class_balanced"``).

    Returns:
        Scalar loss. Cost: time and memory ``O(Q N)``.

    Example:
        >>> s = torch.tensor([[0.8, 0.7, 0.5]])
        >>> round(calibration_loss(s, torch.tensor([[True, False, False]])).item(), 4)
        0.15
    """
    check_margins("alpha", alpha, "beta", beta)
    reduction = check_reduction(reduction, reducer)
    pos_hinge, neg_hinge, positives, negatives, has_positive = _hinges(
        scores, positives, valid, alpha, beta, require_positive=reduction == "query"
    )
    if reduction == "batch_active":
        pos_active, neg_active = (pos_hinge > 0).sum().clamp(min=1), (neg_hinge > 0).sum().clamp(min=1)
        return pos_hinge.sum() / pos_active + neg_hinge.sum() / neg_active
    per_query = _masked_mean(pos_hinge, positives) + _masked_mean(neg_hinge, negatives)
    return get_reducer(reducer)(per_query, has_positive, query_classes)


def contrastive_loss(
    scores: Tensor,
    positives: Tensor,
    valid: Tensor | None = None,
    *,
    pos_margin: float = 1.0,
    neg_margin: float = 0.5,
    reducer: str | Reducer = "mean",
    query_classes: Tensor | None = None,
) -> Tensor:
    """Contrastive (pair) loss with cosine similarities (Hadsell et al. 2006, in the form of Wang et al., XBM 2020)::

        L = mean_q [ sum_{j in P_q} [pos_margin - s_j]_+  +  sum_{j in N_q} [s_j - neg_margin]_+ ]

    With the default ``pos_margin = 1`` the positive term is ``1 - s_j``. Queries without a positive are skipped; the
    per-query sums go to the ``reducer`` (``"mean"``: the formula above).

    Args:
        scores: ``[Q, N]`` cosine similarities.
        positives: ``[Q, N]`` bool positives mask.
        valid: ``[Q, N]`` bool mask of the items in each query's retrieval set (``None`` = all).
        pos_margin: similarity positives are pulled to (1.0). neg_margin: negatives are pushed below it (0.5).
        reducer: ``"mean"``, ``"class_balanced"``, ``"active"``, ``"none"`` or a
            :class:`~ranklit.functional.Reducer`.
        query_classes: ``[Q]`` finest class of each query (needed by ``"class_balanced"``).

    Returns:
        Scalar loss. Cost: time and memory ``O(Q N)``.

    Example:
        >>> s = torch.tensor([[0.8, 0.7, 0.5]])
        >>> round(contrastive_loss(s, torch.tensor([[True, False, False]])).item(), 4)
        0.4
    """
    check_margins("pos_margin", pos_margin, "neg_margin", neg_margin)
    pos_hinge, neg_hinge, _, _, has_positive = _hinges(scores, positives, valid, pos_margin, neg_margin)
    per_query = pos_hinge.sum(dim=1) + neg_hinge.sum(dim=1)
    return get_reducer(reducer)(per_query, has_positive, query_classes)


def _hinges(
    scores: Tensor,
    positives: Tensor,
    valid: Tensor | None,
    pos_margin: float,
    neg_margin: float,
    require_positive: bool = True,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Masked hinges ``[pos_margin - s]_+`` on positives and ``[s - neg_margin]_+`` on negatives, the two masks and
    the ``[Q]`` mask of queries with a positive (``ValueError`` when none has one, if ``require_positive``)."""
    valid = check_score_masks(scores, positives, valid)
    positives = positives & valid
    negatives = valid & ~positives
    has_positive = require_positive_queries(positives) if require_positive else positives.any(dim=1)
    zero = torch.zeros_like(scores)
    pos_hinge = torch.where(positives, (pos_margin - scores).clamp(min=0), zero)
    neg_hinge = torch.where(negatives, (scores - neg_margin).clamp(min=0), zero)
    return pos_hinge, neg_hinge, positives, negatives, has_positive


def _masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    """Row means of ``values`` over ``mask`` (0 for an empty row)."""
    return values.sum(dim=1) / mask.sum(dim=1).clamp(min=1)
