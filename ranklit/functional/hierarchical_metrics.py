"""Metrics that need the whole order of the retrieval set: H-AP, ASI and NDCG (SPEC.md §1), and the per-level binary
metrics of hierarchical labels, read off the same sort.

These metrics weigh every relevant item by its level, so, unlike the binary metrics of
:mod:`ranklit.functional.positive_ranks`, they sort each query's row once. Ties stay pessimistic: an item's rank is the
last position of its group of equal scores (``rank(k) = #{j : s_j >= s_k}``), and "the top ``k``" is the set of items
whose rank is at most ``k`` (a tie group straddling position ``k`` is left out entirely).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ranklit.functional.positive_ranks import binary_query_metrics
from ranklit.functional.relevance import relevance

__all__ = ["SortedRanking", "sort_ranking", "level_binary_metrics", "hierarchical_query_metrics"]


def _discount_table(size: int, device: torch.device) -> Tensor:
    """``D[m] = sum_{p=1..m} 1 / log2(1 + p)``, ``D[0] = 0``."""
    positions = torch.arange(1, size + 1, dtype=torch.float64, device=device)
    return torch.cat([positions.new_zeros(1), (1.0 / torch.log2(1.0 + positions)).cumsum(0)])


@dataclass(frozen=True)
class SortedRanking:
    """Each row of a chunk sorted once by decreasing score, with the per-level counts every metric reads.

    Per-level quantities are lists of ``L`` tensors of shape ``[C, N]`` (level ``v = 1..L``), so that every operation
    runs along the long, contiguous item dimension.

    Attributes:
        levels: ``[C, N]`` levels in sorted order (removed items: 0, at the end).
        valid: ``[C, N]`` which sorted entries are in the retrieval set (not removed).
        is_end: ``[C, N]`` the entry is the last of its group of equal scores.
        rank: ``[C, N]`` float64 pessimistic rank ``#{j : s_j >= s_k}`` of each sorted entry.
        cumulative: ``L x [C, N]`` int32, number of items of level ``v`` at or before each sorted position.
        at_or_above: ``L x [C, N]`` float64, number of items of level ``v`` scoring at least as high as the entry.
        per_level: ``[C, L]`` float64, ``|Omega^(v)|`` for ``v = 1..L``.
    """

    levels: Tensor
    valid: Tensor
    is_end: Tensor
    rank: Tensor
    cumulative: list[Tensor]
    at_or_above: list[Tensor]
    per_level: Tensor

    @property
    def num_levels(self) -> int:
        """``L``."""
        return int(self.per_level.shape[1])


def sort_ranking(scores: Tensor, levels: Tensor, num_levels: int) -> SortedRanking:
    """Sort each row of ``scores`` (``[C, N]``, removed items ``-inf``) and count the levels (``[C, N]``).

    Cost: one sort per row, ``O(C * N * log N)`` time and ``O(C * N * L)`` memory.
    """
    num_queries, num_items = scores.shape
    sorted_scores, order = torch.sort(scores, dim=1, descending=True)
    valid = torch.isfinite(sorted_scores)
    sorted_levels = torch.where(valid, levels.gather(1, order), 0)
    position = torch.arange(num_items, device=scores.device).expand(num_queries, num_items)
    is_end = torch.ones_like(valid)
    is_end[:, :-1] = sorted_scores[:, :-1] != sorted_scores[:, 1:]
    group_end = torch.where(is_end, position, num_items).flip(1).cummin(1).values.flip(1)
    cumulative = [(sorted_levels == v).to(torch.int32).cumsum(1, dtype=torch.int32) for v in range(1, num_levels + 1)]
    return SortedRanking(
        levels=sorted_levels,
        valid=valid,
        is_end=is_end,
        rank=(group_end + 1).to(torch.float64),
        cumulative=cumulative,
        at_or_above=[counts.gather(1, group_end).to(torch.float64) for counts in cumulative],
        per_level=torch.stack([counts[:, -1] for counts in cumulative], 1).to(torch.float64),
    )


def level_binary_metrics(ranking: SortedRanking, column: int, recall_at: tuple[int, ...]) -> dict[str, Tensor]:
    """AP, mAP@R, P@1, Recall@k where positive = same label at column ``column`` (level >= L - column).

    Reads the ranks off the sorted rows, so every column costs ``O(C * N)`` once the rows are sorted.
    """
    min_level = ranking.num_levels - column
    positives = ranking.levels >= min_level
    rank_pos = sum(ranking.at_or_above[v - 1] for v in range(min_level + 1, ranking.num_levels + 1))
    rank_pos = ranking.at_or_above[min_level - 1] + rank_pos
    return binary_query_metrics(ranking.rank, rank_pos, positives, recall_at)


def hierarchical_query_metrics(ranking: SortedRanking, alpha: float) -> dict[str, Tensor]:
    """Per-query H-AP, ASI and NDCG.

    ::

        H-AP = sum_{k in Omega+} H-rank(k) / rank(k) / sum_{k in Omega+} rel(k)              (HAPPIER Eq. 3)
        H-rank(k) = rel(k) + sum_{j in Omega+, j != k} min(rel(k), rel(j)) H(s_j - s_k)
        ASI  = (1/R) sum_{k=1..R} (1/k) sum_{v=1..L} min(#{level v in top k}, #{level v in ideal top k})
        NDCG = sum_k (2^level(k) - 1) / log2(1 + rank(k)) / IDCG                             (full list)

    with ``rel`` the relevance of HAPPIER Eq. 4 (:func:`ranklit.functional.relevance.relevance`), ``Omega+`` the
    items of level >= 1 and ``R = |Omega+|``.

    Args:
        ranking: the sorted rows (:func:`sort_ranking`).
        alpha: exponent of the relevance's level term.

    Returns:
        ``{"has_positive": [C] bool, "hap": [C], "asi": [C], "ndcg": [C]}``, float64 per query, 0 for queries with no
        item of level >= 1 (leave those out of the means).

    Example:
        >>> ranking = sort_ranking(torch.tensor([[6.0, 5, 4, 3, 2, 1]]), torch.tensor([[1, 2, 0, 2, 1, 0]]), 2)
        >>> out = hierarchical_query_metrics(ranking, alpha=1.0)
        >>> round(float(out["asi"]), 5), round(float(out["ndcg"]), 3)
        (0.47917, 0.785)
    """
    levels, rank, per_level = ranking.levels, ranking.rank, ranking.per_level
    num_queries, num_items = levels.shape
    num_levels = ranking.num_levels
    device = levels.device
    num_relevant = per_level.sum(1)
    has_positive = num_relevant > 0
    denominator = num_relevant.clamp(min=1.0)

    # H-AP: the j = k term of H-rank is min(rel(k), rel(k)) = rel(k), so H-rank sums over all j with s_j >= s_k.
    rel = relevance(levels, num_levels, alpha=alpha, valid=ranking.valid)
    level_rel = torch.zeros(num_queries, num_levels + 1, dtype=torch.float64, device=device)
    level_rel = level_rel.scatter_reduce(1, levels, rel, reduce="amax")
    h_rank = torch.zeros_like(rel)
    for v in range(1, num_levels + 1):
        h_rank += torch.minimum(rel, level_rel[:, v : v + 1]) * ranking.at_or_above[v - 1]
    hap = (h_rank / rank).sum(1) / rel.sum(1).clamp(min=torch.finfo(torch.float64).tiny)

    # ASI over k = 1..R: counts in the top k = counts up to the last tie-group end before position k.
    width = int(num_relevant.max()) if num_queries else 0
    position = torch.arange(num_items, device=device).expand(num_queries, num_items)
    last_end = torch.where(ranking.is_end, position, -1).cummax(1).values[:, :width]
    before_start = last_end < 0
    last_end = last_end.clamp(min=0)
    k = torch.arange(1, width + 1, dtype=torch.float64, device=device)
    above_level = per_level.flip(1).cumsum(1).flip(1) - per_level  # items of a strictly higher level
    overlap = torch.zeros(num_queries, width, dtype=torch.float64, device=device)
    for v in range(1, num_levels + 1):
        top = ranking.cumulative[v - 1].gather(1, last_end).masked_fill(before_start, 0).to(torch.float64)
        ideal = torch.minimum((k - above_level[:, v - 1 : v]).clamp(min=0.0), per_level[:, v - 1 : v])
        overlap += torch.minimum(top, ideal)
    overlap = torch.where(k <= num_relevant[:, None], overlap / k, 0.0)
    asi = overlap.sum(1) / denominator

    # NDCG with gain 2^level - 1; the ideal list puts the levels in decreasing order.
    dcg = ((torch.pow(2.0, levels.to(torch.float64)) - 1.0) / torch.log2(1.0 + rank)).sum(1)
    table = _discount_table(num_items, device)
    level_gain = torch.pow(2.0, torch.arange(1, num_levels + 1, dtype=torch.float64, device=device)) - 1.0
    idcg = (level_gain * (table[(above_level + per_level).long()] - table[above_level.long()])).sum(1)
    ndcg = dcg / idcg.clamp(min=math.ulp(0.0))
    zero = torch.zeros_like(hap)
    return {
        "has_positive": has_positive,
        "hap": torch.where(has_positive, hap, zero),
        "asi": asi,
        "ndcg": torch.where(has_positive, ndcg, zero),
    }
