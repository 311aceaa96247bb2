"""Histogram-binned AP losses: FastAP (Cakir et al., CVPR 2019) and the listwise mAP_Q / mAP_T loss (Revaud et al.,
ICCV 2019).

Both quantise each query's scores (or distances) with a triangular kernel over ``M`` evenly spaced bin centres
``c_1 .. c_M`` ordered from the most to the least relevant (width ``Delta`` = the spacing)::

    w_m(x) = max(0, 1 - |x - c_m| / Delta),   h+_m = sum_{j in P_q} w_m(x_j),   h_m = sum_{j in Omega_q} w_m(x_j)

and read AP off the cumulative histograms ``H+_m``, ``H_m``::

    AP_q = (1/|P_q|) sum_m h+_m * H+_m / H_m          (0/0 terms = 0)

FastAP bins the squared distance ``z = 2 - 2s`` over ``[0, 4]`` (``K + 1`` centres ``4l/K``); SoftBin AP bins the
cosine score over ``[-1, 1]`` (``M`` centres ``1 - (m-1) * 2/(M-1)``). The two are the same function when
``M = K + 1``. A value has non-zero weight in its two nearest bins only, so the histograms are built with
``scatter_add`` in time and memory ``O(Q (N + M))`` (the authors' code materialises ``[Q, M, N]``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ranklit._checks import check_int_at_least
from ranklit.functional.losses.contract import check_score_masks, reduce_ap_loss, require_positive_queries
from ranklit.functional.reducers import Reducer

__all__ = ["fastap_loss", "softbin_ap_loss"]


def fastap_loss(
    scores: Tensor,
    positives: Tensor,
    valid: Tensor | None = None,
    *,
    num_bins: int = 10,
    reducer: str | Reducer = "mean",
    query_classes: Tensor | None = None,
) -> Tensor:
    """FastAP loss (Cakir et al., CVPR 2019, Eq. 14): ``1 - mean_q FastAP_q`` on distances ``z = 2 - 2s``::

        FastAP_q = (1/N+_q) sum_{l=0..K} h+_l H+_l / H_l,   K + 1 triangular bins of width 4/K centred at 4l/K

    Queries without a positive are dropped; the terms ``1 - FastAP_q`` of the others go to the ``reducer``
    (:mod:`ranklit.functional.reducers`; ``"mean"``: the formula). Gradients come from autograd: the authors'
    hand-written backward returns ``N/2`` times the true gradient and ignores ``grad_output`` (deliberately not
    reproduced).

    Args:
        scores: ``[Q, N]`` cosine similarities of L2-normalised embeddings.
        positives: ``[Q, N]`` bool positives mask.
        valid: ``[Q, N]`` bool mask of each query's retrieval set (``None`` = all).
        num_bins: ``K`` (10); ``K + 1`` bin centres.
        reducer: ``"mean"``, ``"class_balanced"``, ``"active"``, ``"none"`` or a
            :class:`~ranklit.functional.Reducer`.
        query_classes: ``[Q]`` finest class of each query (needed by ``"class_balanced"``).

    Returns:
        Scalar loss in ``[0, 1]`` (``[Q]`` with ``reducer="none"``). Cost: time and memory ``O(Q (N + K))``.

    Example:
        >>> s = torch.tensor([[0.9, -0.9, 0.8]])
        >>> round(fastap_loss(s, torch.tensor([[True, False, True]])).item(), 4)
        0.0
    """
    num_bins = check_int_at_least("num_bins", num_bins, 1)
    per_query, has_positive = _binned_ap(2.0 - 2.0 * scores, 0.0, 4.0 / num_bins, num_bins + 1, positives, valid, False)
    return reduce_ap_loss(per_query, has_positive, reducer, query_classes)


def softbin_ap_loss(
    scores: Tensor,
    positives: Tensor,
    valid: Tensor | None = None,
    *,
    num_bins: int = 20,
    tie_aware: bool = False,
    reducer: str | Reducer = "mean",
    query_classes: Tensor | None = None,
) -> Tensor:
    """Listwise AP loss (Revaud et al., ICCV 2019, Eq. 7-12): ``1 - mAP_Q`` with ``M`` soft bins over ``[-1, 1]``::

        b_m = 1 - (m-1) Delta,  Delta = 2/(M-1),  AP_Q = sum_m P_m dr_m,  P_m = H+_m / H_m,  dr_m = h+_m / N+

    ``tie_aware=True`` uses the precision of Eq. 13 (``mAP_T``):
    ``P_m = (1 + h+_m + 2 H+_{m-1}) / (1 + h_m + 2 H_{m-1})``. Queries without a positive are skipped; the terms
    ``1 - AP_q`` of the others go to the ``reducer`` (``"mean"``: all queries weigh the same; ``"class_balanced"``
    with ``query_classes``: every class of the batch weighs the same, the paper's §4.2). The authors' code keeps the
    two end bins flat beyond the end centres; the kernel here is triangular everywhere ([spec §2][spec-losses]): it
    differs only for scores out of ``[-1, 1]``.

    Args:
        scores: ``[Q, N]`` cosine similarities.
        positives: ``[Q, N]`` bool positives mask.
        valid: ``[Q, N]`` bool mask of each query's retrieval set (``None`` = all).
        num_bins: ``M`` (20), at least 2.
        tie_aware: use the tie-aware precision ``mAP_T`` (off by default).
        reducer: ``"mean"``, ``"class_balanced"``, ``"active"``, ``"none"`` or a
            :class:`~ranklit.functional.Reducer`.
        query_classes: ``[Q]`` finest class of each query (needed by ``"class_balanced"``).

    Returns:
        Scalar loss in ``[0, 1]`` (``[Q]`` with ``reducer="none"``). Cost: time and memory ``O(Q (N + M))``.

    Example:
        >>> s = torch.tensor([[0.9, -0.9, 0.8]])
        >>> round(softbin_ap_loss(s, torch.tensor([[True, False, True]])).item(), 4)
        0.0
    """
    num_bins = check_int_at_least("num_bins", num_bins, 2)
    per_query, has_positive = _binned_ap(scores, 1.0, -2.0 / (num_bins - 1), num_bins, positives, valid, tie_aware)
    return reduce_ap_loss(per_query, has_positive, reducer, query_classes)


def _binned_ap(
    values: Tensor,
    start: float,
    step: float,
    num_centres: int,
    positives: Tensor,
    valid: Tensor | None,
    tie_aware: bool,
) -> tuple[Tensor, Tensor]:
    """Per-query binned AP ``[Q]`` and the ``[Q]`` mask of the queries with a positive.

    Centres are ``start + m * step`` (``m = 0 .. num_centres - 1``, most relevant first). The triangular kernel of
    width ``|step|`` is non-zero on the two centres around a value only, so each item adds its two weights to the
    histograms with ``scatter_add``; values beyond the end centres get ``max(0, 1 - distance / width)`` on the end
    bin, exactly as the dense kernel would.
    """
    valid = check_score_masks(values, positives, valid)
    positives = positives & valid
    has_positive = require_positive_queries(positives)
    position = (values - start) / step
    low = position.detach().floor().clamp(0, num_centres - 2).long()
    w_low = (1.0 - (position - low).abs()).clamp(min=0)
    w_high = (1.0 - (position - low - 1).abs()).clamp(min=0)
    empty = values.new_zeros(values.shape[0], num_centres)

    def histogram(mask: Tensor) -> Tensor:
        return empty.scatter_add(1, low, w_low * mask).scatter_add(1, low + 1, w_high * mask)

    hist_pos, hist = histogram(positives), histogram(valid)
    cum_pos, cum = hist_pos.cumsum(dim=1), hist.cumsum(dim=1)
    if tie_aware:
        precision = (1.0 + hist_pos + 2.0 * (cum_pos - hist_pos)) / (1.0 + hist + 2.0 * (cum - hist))
    else:
        filled = cum > 0
        precision = torch.where(filled, cum_pos / torch.where(filled, cum, torch.ones_like(cum)), torch.zeros_like(cum))
    ap = (precision * hist_pos).sum(dim=1) / positives.sum(dim=1).clamp(min=1)
    return ap, has_positive
