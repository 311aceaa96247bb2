"""H-AP, ASI and NDCG ([spec §1][spec-metrics]), and the per-level binary metrics of hierarchical labels, from the
ranks of the relevant items only.

Every one of these metrics is a function of the items of level ``>= 1`` (same coarsest label: ``Omega+``): their
levels, their ranks in the whole retrieval set, and how many relevant items of each level score at least as high.
Level-0 items only push the relevant ones down, which their ranks already count. So, as for the binary metrics of
:mod:`ranklit.functional.positive_ranks`, only the ``R`` relevant items of a query are sorted and each rank is a count
over the row: no row is sorted. Ties stay pessimistic: an item's rank is the last position of its group of equal
scores (``rank(k) = #{j : s_j >= s_k}``), and "the top ``k``" is the set of items whose rank is at most ``k`` (a tie
group straddling position ``k`` is left out entirely).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ranklit.functional.positive_ranks import binary_query_metrics, count_at_least, sort_positive_scores
from ranklit.functional.relevance import relevance

__all__ = ["RelevantRanking", "rank_relevant_items", "level_binary_metrics", "hierarchical_query_metrics"]


def _discount_table(size: int, device: torch.device) -> Tensor:
    """``D[m] = sum_{p=1..m} 1 / log2(1 + p)``, ``D[0] = 0``."""
    positions = torch.arange(1, size + 1, dtype=torch.float64, device=device)
    return torch.cat([positions.new_zeros(1), (1.0 / torch.log2(1.0 + positions)).cumsum(0)])


@dataclass(frozen=True)
class RelevantRanking:
    """The relevant items of each query of a chunk, by decreasing score, ranked in the whole retrieval set.

    Per-level quantities are lists of ``L`` tensors (level ``v = 1..L``).

    Attributes:
        levels: ``[C, R]`` levels of the relevant items in decreasing score order (padding: level 0, at the end).
        valid: ``[C, R]`` which entries are real.
        rank: ``[C, R]`` float64 pessimistic rank ``#{j : s_j >= s_k}`` in the whole retrieval set (padding: 1).
        at_or_above: ``L x [C, R]`` float64, number of items of level ``v`` scoring at least as high as the entry.
        per_level: ``[C, L]`` float64, ``|Omega^(v)|`` for ``v = 1..L``.
    """

    levels: Tensor
    valid: Tensor
    rank: Tensor
    at_or_above: list[Tensor]
    per_level: Tensor

    @property
    def num_levels(self) -> int:
        """``L``."""
        return int(self.per_level.shape[1])


def rank_relevant_items(
    scores: Tensor, index: Tensor, valid: Tensor, levels: Tensor, num_levels: int
) -> RelevantRanking:
    """Sort the relevant items of each row and rank them in the whole row.

    Args:
        scores: ``[C, N]`` scores of a chunk of queries; removed items hold ``-inf`` (they are never relevant).
        index: ``[C, P]`` columns of the candidate relevant items (those sharing the query's coarsest label).
        valid: ``[C, P]`` which entries of ``index`` are real.
        levels: ``[C, P]`` their levels (``>= 1``).
        num_levels: ``L``.

    Cost: a sort of the ``P`` candidates and one count per candidate over the row
    (:func:`~ranklit.functional.positive_ranks.count_at_least`); memory ``O(C * (N + P * L))``.

    Example:
        >>> s = torch.tensor([[6.0, 5, 4, 3, 2, 1]])
        >>> ranking = rank_relevant_items(s, torch.tensor([[4, 0, 1, 3]]), torch.ones(1, 4, dtype=torch.bool),
        ...                               torch.tensor([[1, 1, 2, 2]]), num_levels=2)
        >>> ranking.levels.tolist(), ranking.rank.tolist(), ranking.at_or_above[1].tolist()
        ([[1, 2, 2, 1]], [[1.0, 2.0, 4.0, 5.0]], [[0.0, 1.0, 2.0, 2.0]])
    """
    descending, _, valid, order = sort_positive_scores(scores, index, valid)
    levels = torch.where(valid, levels.gather(1, order), 0)
    rank = torch.where(valid, count_at_least(scores, descending), 1).to(torch.float64)
    num_queries, width = descending.shape
    position = torch.arange(width, device=scores.device).expand(num_queries, width)
    is_end = torch.ones_like(valid)
    is_end[:, :-1] = descending[:, :-1] != descending[:, 1:]  # the padding (-inf) never ties with a real score
    group_end = torch.where(is_end, position, width).flip(1).cummin(1).values.flip(1)
    cumulative = [(levels == v).to(torch.int32).cumsum(1, dtype=torch.int32) for v in range(1, num_levels + 1)]
    per_level = torch.stack([(levels == v).sum(1) for v in range(1, num_levels + 1)], 1).to(torch.float64)
    return RelevantRanking(
        levels=levels,
        valid=valid,
        rank=rank,
        at_or_above=[counts.gather(1, group_end).to(torch.float64) for counts in cumulative],
        per_level=per_level,
    )


def level_binary_metrics(ranking: RelevantRanking, column: int, recall_at: tuple[int, ...]) -> dict[str, Tensor]:
    """AP, mAP@R, P@1, Recall@k where positive = same label at column ``column`` (level >= L - column).

    The positives of every column are relevant items, so each column costs ``O(C * R * L)`` once they are ranked.
    """
    min_level = ranking.num_levels - column
    positives = ranking.levels >= min_level
    rank_pos = sum(ranking.at_or_above[v - 1] for v in range(min_level + 1, ranking.num_levels + 1))
    rank_pos = ranking.at_or_above[min_level - 1] + rank_pos
    return binary_query_metrics(ranking.rank, rank_pos, positives, recall_at)


def hierarchical_query_metrics(ranking: RelevantRanking, alpha: float) -> dict[str, Tensor]:
    """Per-query H-AP, ASI and NDCG.

    ::

        H-AP = sum_{k in Omega+} H-rank(k) / rank(k) / sum_{k in Omega+} rel(k)              (HAPPIER Eq. 3)
        H-rank(k) = rel(k) + sum_{j in Omega+, j != k} min(rel(k), rel(j)) H(s_j - s_k)
        ASI  = (1/R) sum_{k=1..R} (1/k) sum_{v=1..L} min(#{level v in top k}, #{level v in ideal top k})
        NDCG = sum_k (2^level(k) - 1) / log2(1 + rank(k)) / IDCG                             (full list)

    with ``rel`` the relevance of HAPPIER Eq. 4 (:func:`ranklit.functional.relevance.relevance`), ``Omega+`` the
    items of level >= 1 and ``R = |Omega+|``.

    Args:
        ranking: the ranked relevant items (:func:`rank_relevant_items`).
        alpha: exponent of the relevance's level term.

    Returns:
        ``{"has_positive": [C] bool, "hap": [C], "asi": [C], "ndcg": [C]}``, float64 per query, 0 for queries with no
        item of level >= 1 (leave those out of the means).

    Example:
        >>> s, relevant = torch.tensor([[6.0, 5, 4, 3, 2, 1]]), torch.tensor([[0, 1, 3, 4]])  # levels 1, 2, 2, 1
        >>> ranking = rank_relevant_items(s, relevant, relevant >= 0, torch.tensor([[1, 2, 2, 1]]), num_levels=2)
        >>> out = hierarchical_query_metrics(ranking, alpha=1.0)
        >>> round(float(out["asi"]), 5), round(float(out["ndcg"]), 3)
        (0.47917, 0.785)
    """
    levels, rank, per_level = ranking.levels, ranking.rank, ranking.per_level
    num_queries = levels.shape[0]
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

    # ASI over k = 1..R: top[v][k] = #{items of level v with rank <= k}, a cumulative histogram of the ranks.
    width = int(num_relevant.max()) if num_queries else 0
    k = torch.arange(1, width + 1, dtype=torch.float64, device=device)
    above_level = per_level.flip(1).cumsum(1).flip(1) - per_level  # items of a strictly higher level
    bins = rank.long().clamp(max=width + 1)  # ranks beyond R never reach a top k with k <= R
    overlap = torch.zeros(num_queries, width, dtype=torch.float64, device=device)
    for v in range(1, num_levels + 1):
        histogram = torch.zeros(num_queries, width + 2, dtype=torch.float64, device=device)
        histogram.scatter_add_(1, bins, (levels == v).to(torch.float64))
        top = histogram.cumsum(1)[:, 1 : width + 1]
        ideal = torch.minimum((k - above_level[:, v - 1 : v]).clamp(min=0.0), per_level[:, v - 1 : v])
        overlap += torch.minimum(top, ideal)
    overlap = torch.where(k <= num_relevant[:, None], overlap / k, 0.0)
    asi = overlap.sum(1) / denominator

    # NDCG with gain 2^level - 1; the ideal list puts the levels in decreasing order.
    dcg = ((torch.pow(2.0, levels.to(torch.float64)) - 1.0) / torch.log2(1.0 + rank)).sum(1)
    table = _discount_table(width, device)
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
