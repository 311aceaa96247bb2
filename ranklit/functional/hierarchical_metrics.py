"""Metrics that need the whole order of the retrieval set: H-AP, ASI and NDCG (SPEC.md §1).

These metrics weigh every relevant item by its level, so, unlike the binary metrics of
:mod:`ranklit.functional.positive_ranks`, they sort each query's row once. Ties stay pessimistic: an item's rank is the
last position of its group of equal scores (``rank(k) = #{j : s_j >= s_k}``), and "the top ``k``" is the set of items
whose rank is at most ``k`` (a tie group straddling position ``k`` is left out entirely).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ranklit.functional.relevance import relevance

__all__ = ["hierarchical_query_metrics"]


def _discount_table(size: int, device: torch.device) -> Tensor:
    """``D[m] = sum_{p=1..m} 1 / log2(1 + p)``, ``D[0] = 0``."""
    positions = torch.arange(1, size + 1, dtype=torch.float64, device=device)
    return torch.cat([positions.new_zeros(1), (1.0 / torch.log2(1.0 + positions)).cumsum(0)])


def hierarchical_query_metrics(scores: Tensor, levels: Tensor, num_levels: int, alpha: float) -> dict[str, Tensor]:
    """Per-query H-AP, ASI and NDCG.

    ::

        H-AP = sum_{k in Omega+} H-rank(k) / rank(k) / sum_{k in Omega+} rel(k)              (HAPPIER Eq. 3)
        H-rank(k) = rel(k) + sum_{j in Omega+, j != k} min(rel(k), rel(j)) H(s_j - s_k)
        ASI  = (1/R) sum_{k=1..R} (1/k) sum_{v=1..L} min(#{level v in top k}, #{level v in ideal top k})
        NDCG = sum_k (2^level(k) - 1) / log2(1 + rank(k)) / IDCG                             (full list)

    with ``rel`` the relevance of HAPPIER Eq. 4 (:func:`ranklit.functional.relevance.relevance`), ``Omega+`` the
    items of level >= 1 and ``R = |Omega+|``.

    Args:
        scores: ``[C, N]`` scores of a chunk of queries; removed items (the query itself, junk) hold ``-inf``.
        levels: ``[C, N]`` levels in ``0..num_levels`` (removed items: any value, they are ignored).
        num_levels: ``L``.
        alpha: exponent of the relevance's level term.

    Returns:
        ``{"has_positive": [C] bool, "hap": [C], "asi": [C], "ndcg": [C]}``, float64 per query, 0 for queries with no
        item of level >= 1 (leave those out of the means).

    Cost: one sort per row, ``O(C * N * log N)`` time and ``O(C * N * L)`` memory.

    Example:
        >>> out = hierarchical_query_metrics(torch.tensor([[6.0, 5, 4, 3, 2, 1]]), torch.tensor([[1, 2, 0, 2, 1, 0]]), 2, 1.0)
        >>> round(float(out["asi"]), 5), round(float(out["ndcg"]), 3)
        (0.47917, 0.785)
    """
    num_queries, num_items = scores.shape
    valid = torch.isfinite(scores)
    levels = torch.where(valid, levels, 0)
    rel = relevance(levels, num_levels, alpha=alpha, valid=valid)
    order = torch.argsort(scores, dim=1, descending=True)
    sorted_scores = scores.gather(1, order)
    sorted_levels = levels.gather(1, order)
    sorted_rel = rel.gather(1, order)
    position = torch.arange(num_items, device=scores.device).expand(num_queries, num_items)
    is_end = torch.ones_like(valid)
    is_end[:, :-1] = sorted_scores[:, :-1] != sorted_scores[:, 1:]
    group_end = torch.where(is_end, position, num_items).flip(1).cummin(1).values.flip(1)
    rank = (group_end + 1).to(torch.float64)
    level_values = torch.arange(1, num_levels + 1, device=scores.device)
    cumulative = (sorted_levels[..., None] == level_values).to(torch.int32).cumsum(1)  # [C, N, L]
    per_level = cumulative[:, -1, :].to(torch.float64)  # |Omega^(v)|, v = 1..L
    num_relevant = per_level.sum(1)
    has_positive = num_relevant > 0
    denominator = num_relevant.clamp(min=1.0)

    # H-AP: the j = k term of H-rank is min(rel(k), rel(k)) = rel(k), so H-rank sums over all j with s_j >= s_k.
    at_or_above = cumulative.gather(1, group_end[..., None].expand(-1, -1, num_levels)).to(torch.float64)
    level_rel = torch.zeros(num_queries, num_levels + 1, dtype=torch.float64, device=scores.device)
    level_rel = level_rel.scatter_reduce(1, sorted_levels, sorted_rel, reduce="amax")[:, 1:]
    h_rank = (torch.minimum(sorted_rel[..., None], level_rel[:, None, :]) * at_or_above).sum(-1)
    total_rel = sorted_rel.sum(1).clamp(min=torch.finfo(torch.float64).tiny)
    hap = (h_rank / rank).sum(1) / total_rel

    # ASI over k = 1..R: counts in the top k = counts up to the last tie-group end before position k.
    width = int(num_relevant.max()) if num_queries else 0
    last_end = torch.where(is_end, position, -1).cummax(1).values[:, :width]
    top = cumulative.gather(1, last_end.clamp(min=0)[..., None].expand(-1, -1, num_levels))
    top = torch.where(last_end[..., None] >= 0, top, 0).to(torch.float64)
    k = torch.arange(1, width + 1, dtype=torch.float64, device=scores.device)
    above_level = per_level.flip(1).cumsum(1).flip(1) - per_level  # items of a strictly higher level
    ideal = torch.minimum((k[None, :, None] - above_level[:, None, :]).clamp(min=0.0), per_level[:, None, :])
    overlap = torch.minimum(top, ideal).sum(-1) / k
    overlap = torch.where(k[None, :] <= num_relevant[:, None], overlap, 0.0)
    asi = overlap.sum(1) / denominator

    # NDCG with gain 2^level - 1; the ideal list puts the levels in decreasing order.
    gain = torch.pow(2.0, sorted_levels.to(torch.float64)) - 1.0
    dcg = (gain / torch.log2(1.0 + rank)).sum(1)
    table = _discount_table(num_items, scores.device)
    level_gain = torch.pow(2.0, level_values.to(torch.float64)) - 1.0
    start = above_level.long()
    stop = (above_level + per_level).long()
    idcg = (level_gain * (table[stop] - table[start])).sum(1)
    ndcg = dcg / idcg.clamp(min=math.ulp(0.0))
    zero = torch.zeros_like(hap)
    return {
        "has_positive": has_positive,
        "hap": torch.where(has_positive, hap, zero),
        "asi": asi,
        "ndcg": torch.where(has_positive, ndcg, zero),
    }
