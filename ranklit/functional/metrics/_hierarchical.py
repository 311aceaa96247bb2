"""H-AP, ASI and NDCG ([spec §1][spec-metrics]), and the per-level binary metrics of hierarchical labels, from the
ranks of the relevant items only.

Every one of these metrics is a function of the items of level ``>= 1`` (same coarsest label: ``Omega+``): their
levels, their ranks in the whole retrieval set, and how many relevant items of each level score at least as high.
Level-0 items only push the relevant ones down, which their ranks already count. So, as for the binary metrics of
:mod:`ranklit.functional.metrics._positive_ranks`, only the ``R`` relevant items of a query are sorted and each rank is
a count over the row: no row is sorted. Ties follow the policy of [spec §0][spec-ties]: under ``"pessimistic"`` (resp.
``"optimistic"``) the items of a group of equal scores are ordered by increasing (resp. decreasing) level, level-0
items first (resp. last), and every metric reads that ordering but H-AP, which reads each group by increasing (resp.
decreasing) relevance, its worst (resp. best) ordering (:func:`hierarchical_query_metrics`); under ``"average"``
every metric is its expectation over the uniformly random orderings of the tie groups (closed forms, and
hypergeometric draws for ASI).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from ranklit.functional.metrics._counting import count_at_least
from ranklit.functional.metrics._positive_ranks import sort_positive_scores
from ranklit.functional.metrics.binary import _discounts, _harmonic, binary_query_metrics
from ranklit.functional.relevance import relevance
from ranklit.functional.ties import TiedPositives, group_bounds, strictly_above_thresholds, tie_positives

__all__ = ["RelevantRanking", "rank_relevant_items", "ranking_from_counts", "level_binary_metrics",
           "hierarchical_query_metrics"]


@dataclass(frozen=True)
class RelevantRanking:
    """The relevant items of each query of a chunk, by decreasing score, counted in the whole retrieval set.

    Within a tie group the items are ordered by the policy (``"pessimistic"``: increasing level; ``"optimistic"``:
    decreasing level; ``"average"``: any order, the metrics average over all); H-AP reorders them by relevance.

    Attributes:
        descending: ``[C, R]`` their scores (``-inf`` padding at the end).
        levels: ``[C, R]`` their levels (padding: 0).
        valid: ``[C, R]`` which entries are real.
        at_least: ``[C, R]`` int64 ``#{j : s_j >= s_k}`` in the whole retrieval set.
        above: ``[C, R]`` int64 ``#{j : s_j > s_k}`` (``None`` under ``"pessimistic"``).
        per_level: ``[C, L]`` float64, ``|Omega^(v)|`` for ``v = 1..L``.
        ties: the tie policy.
    """

    descending: Tensor
    levels: Tensor
    valid: Tensor
    at_least: Tensor
    above: Tensor | None
    per_level: Tensor
    ties: str

    @property
    def num_levels(self) -> int:
        """``L``."""
        return int(self.per_level.shape[1])

    def tied(self, positive: Tensor) -> TiedPositives:
        """The entries marked ``positive`` as :class:`~ranklit.functional.ties.TiedPositives` under the policy."""
        return tie_positives(self.descending, positive & self.valid, self.at_least, self.above, self.ties)


def rank_relevant_items(
    scores: Tensor, index: Tensor, valid: Tensor, levels: Tensor, num_levels: int, ties: str = "pessimistic"
) -> RelevantRanking:
    """Sort the relevant items of each row and count, for each, the items of the row scoring at least as high.

    Args:
        scores: ``[C, N]`` scores of a chunk of queries; removed items hold ``-inf`` (they are never relevant).
        index: ``[C, P]`` columns of the candidate relevant items (those sharing the query's coarsest label).
        valid: ``[C, P]`` which entries of ``index`` are real.
        levels: ``[C, P]`` their levels (``>= 1``).
        num_levels: ``L``.
        ties: the tie policy ([spec §0][spec-ties]).

    Cost: a sort of the ``P`` candidates and one count per candidate over the row (two unless pessimistic;
    :func:`~ranklit.functional.metrics._counting.count_at_least`); memory ``O(C * (N + P * L))``.

    Example:
        >>> s = torch.tensor([[6.0, 5, 4, 3, 2, 1]])
        >>> ranking = rank_relevant_items(s, torch.tensor([[4, 0, 1, 3]]), torch.ones(1, 4, dtype=torch.bool),
        ...                               torch.tensor([[1, 1, 2, 2]]), num_levels=2)
        >>> ranking.levels.tolist(), ranking.at_least.tolist()
        ([[1, 2, 2, 1]], [[1, 2, 4, 5]])
    """
    descending, _, valid, order = sort_positive_scores(scores, index, valid)
    levels = torch.where(valid, levels.gather(1, order), 0)
    at_least = torch.where(valid, count_at_least(scores, descending), 0)
    above = None
    if ties != "pessimistic":
        above = torch.where(valid, count_at_least(scores, strictly_above_thresholds(descending)), 0)
    return ranking_from_counts(descending, valid, levels, at_least, above, num_levels, ties)


def ranking_from_counts(descending: Tensor, valid: Tensor, levels: Tensor, at_least: Tensor, above: Tensor | None,
                        num_levels: int, ties: str) -> RelevantRanking:
    """The :class:`RelevantRanking` of relevant items sorted by decreasing score and counted (by
    :func:`rank_relevant_items`, or the kernel path of :mod:`ranklit.functional.metrics._kernel_counts`; the arguments
    as its attributes, ``levels`` in the same order): each tie group ordered by level as ``ties`` says."""
    if ties != "average" and descending.shape[1] > 1:  # order each tie group by level
        order = _order_in_groups(descending, levels if ties == "pessimistic" else num_levels - levels, num_levels + 1)
        descending, levels, valid = descending.gather(1, order), levels.gather(1, order), valid.gather(1, order)
        at_least = at_least.gather(1, order)
        above = None if above is None else above.gather(1, order)
    per_level = torch.stack([(levels == v).sum(1) for v in range(1, num_levels + 1)], 1).to(torch.float64)
    return RelevantRanking(descending, levels, valid, at_least, above, per_level, ties)


def level_binary_metrics(
    ranking: RelevantRanking, column: int, cutoffs: Mapping[str, tuple[int, ...]]
) -> dict[str, Tensor]:
    """The binary metrics where positive = same label in column ``column`` (level ``>= L - column``).

    The positives of every column are relevant items, so each column costs ``O(C * R)`` once they are ranked.
    """
    positive = ranking.levels >= ranking.num_levels - column
    return binary_query_metrics(ranking.tied(positive), cutoffs)


def hierarchical_query_metrics(ranking: RelevantRanking, alpha: float) -> dict[str, Tensor]:
    """Per-query H-AP, ASI and NDCG under the ranking's tie policy.

    ::

        H-AP = sum_{k in Omega+} H-rank(k) / rank(k) / sum_{k in Omega+} rel(k)              (HAPPIER Eq. 3)
        H-rank(k) = rel(k) + sum_{j in Omega+, j != k} min(rel(k), rel(j)) H(s_j - s_k)
        ASI  = (1/R) sum_{k=1..R} (1/k) sum_{v=1..L} min(#{level v in top k}, #{level v in ideal top k})
        NDCG = sum_k (2^level(k) - 1) / log2(1 + rank(k)) / IDCG                             (full list)

    with ``rel`` the relevance of HAPPIER Eq. 4 (:func:`ranklit.functional.relevance.relevance`), ``Omega+`` the
    items of level >= 1 and ``R = |Omega+|``. Under ``"average"``: H-AP and NDCG in closed form (each position of a
    tie group equally likely for each member), ASI from the hypergeometric law of the levels drawn from the tie group
    straddling position ``k`` (``O(C R L Y)`` with ``Y`` the most items of one level in a tie group).

    Under ``"pessimistic"`` (``"optimistic"``) ASI and NDCG read the ranking's order of each tie group, by increasing
    (decreasing) level, but H-AP reads it by increasing (decreasing) *relevance*, which gives exactly its minimum
    (maximum) over all orderings of the tie groups. Proof: reordering a tie group moves neither the rank nor the
    H-rank of an item outside it (the group is wholly above or wholly below that item), so each group is optimised
    alone. In a group at positions ``a + 1 .. a + n``, let ``w_t = 1 / (a + t)`` (strictly decreasing) and
    ``g_t(r) = r + sum_{j in Omega+ before position t} min(r, rel(j))``, non-decreasing in ``r`` (a level-0 item is
    ``r = 0`` and adds nothing). Swapping the items ``x`` at ``t`` and ``y`` at ``t + 1`` changes nothing else, and
    the pair's own ``min(rel(x), rel(y))`` goes to position ``t + 1`` either way, so ``sum_k rel(k) * H-AP`` changes by
    ``(g_t(rel(x)) - g_t(rel(y))) * (w_t - w_{t+1})``: putting the lower relevance first never raises H-AP. Sorting any
    ordering by such swaps reaches the increasing-relevance ordering without raising H-AP, so that ordering is the
    minimum, and likewise decreasing relevance the maximum; items of equal relevance are interchangeable. The
    ordering by level is not it, as ``rel`` falls with ``|Omega^(l)|``: with ``L = 3``, ``alpha = 1`` and levels
    ``1, 3, 3, 3, 2, 3, 3`` the relevances are ``1/3, 1/5, ..., 2/3, ...``, and a level-3 item is the least relevant.
    Cost: one more stable sort of the ``R`` relevant items of each query, when some relevant items tie.

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
    levels, per_level, num_levels = ranking.levels, ranking.per_level, ranking.num_levels
    tied = ranking.tied(ranking.valid)
    num_relevant = per_level.sum(1)
    has_positive = num_relevant > 0
    rel = relevance(levels, num_levels, alpha=alpha, valid=ranking.valid)
    level_rel = torch.zeros(levels.shape[0], num_levels + 1, dtype=torch.float64, device=levels.device)
    level_rel = level_rel.scatter_reduce(1, levels, rel, reduce="amax")
    hap_levels, hap_rel = levels, rel  # each tie group by relevance for H-AP: its extremes (see above)
    tie = (ranking.descending[:, 1:] == ranking.descending[:, :-1]) & ranking.valid[:, 1:]
    if tied.rank is not None and num_levels > 1 and bool(tie.any()):
        order = _relevance_order(ranking.descending, levels, level_rel, ranking.ties)
        hap_levels, hap_rel = levels.gather(1, order), rel.gather(1, order)
    weights = [torch.minimum(hap_rel, level_rel[:, v : v + 1]) for v in range(1, num_levels + 1)]
    cumulative = [(hap_levels == v).to(torch.float64).cumsum(1) for v in range(1, num_levels + 1)]
    gain = torch.where(ranking.valid, torch.pow(2.0, levels.to(torch.float64)) - 1.0, 0.0)
    if tied.rank is not None:
        # H-rank sums min(rel(k), rel(j)) over the items at or above k in this ordering (k itself gives rel(k))
        h_rank = sum(w * c for w, c in zip(weights, cumulative, strict=True))
        hap_terms = h_rank / tied.rank
        dcg_terms = gain / torch.log2(1.0 + tied.rank)
        full_top = tied.rank
    else:
        assert tied.above is not None and tied.size is not None
        start, end = group_bounds(ranking.descending)
        above_w = sum(w * (c.gather(1, start) - (levels.gather(1, start) == v + 1).to(torch.float64))
                      for v, (w, c) in enumerate(zip(weights, cumulative, strict=True)))
        group_w = sum(w * c.gather(1, end) for w, c in zip(weights, cumulative, strict=True)) - above_w - rel
        a, n = tied.above, tied.size
        harmonic = _harmonic(a, n)
        hap_terms = ((rel + above_w) * harmonic + group_w / (n - 1.0).clamp(min=1.0) * (n - (a + 1.0) * harmonic)) / n
        dcg_terms = gain * (_discounts(torch.where(ranking.valid, a + n, 0.0))
                            - _discounts(torch.where(ranking.valid, a, 0.0))) / n
        full_top = a + n
    hap = torch.where(ranking.valid, hap_terms, 0.0).sum(1) / rel.sum(1).clamp(min=torch.finfo(torch.float64).tiny)

    above_level = per_level.flip(1).cumsum(1).flip(1) - per_level  # items of a strictly higher level
    idcg = (_discounts(above_level + per_level) * _level_gains(num_levels, levels.device)).sum(1) - (
        _discounts(above_level) * _level_gains(num_levels, levels.device)
    ).sum(1)
    ndcg = torch.where(ranking.valid, dcg_terms, 0.0).sum(1) / idcg.clamp(min=math.ulp(0.0))
    asi = _asi(ranking, tied, full_top, above_level)
    zero = torch.zeros_like(hap)
    return {
        "has_positive": has_positive,
        "hap": torch.where(has_positive, hap, zero),
        "asi": asi,
        "ndcg": torch.where(has_positive, ndcg, zero),
    }


def _order_in_groups(descending: Tensor, within: Tensor, span: int) -> Tensor:
    """The permutation of each row that sorts every group of equal scores by ``within`` (integers in ``0..span-1``),
    stably, and keeps the groups where they are (``descending`` sorted in each row)."""
    new_group = torch.ones_like(descending, dtype=torch.bool)
    new_group[:, 1:] = descending[:, 1:] != descending[:, :-1]
    return torch.argsort(new_group.long().cumsum(1) * span + within, dim=1, stable=True)


def _relevance_order(descending: Tensor, levels: Tensor, level_rel: Tensor, ties: str) -> Tensor:
    """The permutation that orders each tie group by increasing (``"pessimistic"``) or decreasing relevance.

    ``level_rel``: ``[C, L + 1]`` the relevance of each level (0 for level 0, the padding, and absent levels).
    """
    num_levels = level_rel.shape[1] - 1
    by_relevance = level_rel.argsort(1).argsort(1)  # the place of each level among its row's relevances
    if ties == "optimistic":
        by_relevance = num_levels - by_relevance
    return _order_in_groups(descending, by_relevance.gather(1, levels), num_levels + 1)


def _level_gains(num_levels: int, device: torch.device) -> Tensor:
    return torch.pow(2.0, torch.arange(1, num_levels + 1, dtype=torch.float64, device=device)) - 1.0


def _asi(ranking: RelevantRanking, tied: TiedPositives, full_top: Tensor, above_level: Tensor) -> Tensor:
    """ASI over ``k = 1..R``; ``full_top``: the position by which each item is surely in the top ``k``."""
    levels, per_level, num_levels = ranking.levels, ranking.per_level, ranking.num_levels
    num_queries = levels.shape[0]
    device = levels.device
    num_relevant = per_level.sum(1)
    width = int(num_relevant.max()) if num_queries else 0
    k = torch.arange(1, width + 1, dtype=torch.float64, device=device)
    bins = torch.where(ranking.valid, full_top, width + 1.0).long().clamp(max=width + 1)
    straddle = None
    if tied.rank is None:  # "average": the tie group straddling position k draws its items at random
        straddle = _straddling_groups(ranking, tied, k)
    overlap = torch.zeros(num_queries, width, dtype=torch.float64, device=device)
    for v in range(1, num_levels + 1):
        histogram = torch.zeros(num_queries, width + 2, dtype=torch.float64, device=device)
        histogram.scatter_add_(1, bins, (levels == v).to(torch.float64))
        top = histogram.cumsum(1)[:, 1 : width + 1]  # items of level v surely in the top k
        ideal = torch.minimum((k - above_level[:, v - 1 : v]).clamp(min=0.0), per_level[:, v - 1 : v])
        if straddle is None:
            overlap += torch.minimum(top, ideal)
        else:
            overlap += _expected_min(top, ideal, straddle, v)
    overlap = torch.where(k <= num_relevant[:, None], overlap / k, 0.0)
    return overlap.sum(1) / num_relevant.clamp(min=1.0)


def _straddling_groups(ranking: RelevantRanking, tied: TiedPositives, k: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """For every ``k``: size, draws and per-level member counts of the tie group straddling position ``k``.

    Returns ``(size, drawn, members)``: ``[C, K]``, ``[C, K]`` and ``[C, K, L]`` (size 1, nothing drawn where no group
    straddles ``k``).
    """
    assert tied.above is not None and tied.size is not None
    a = torch.where(ranking.valid, tied.above, math.inf)  # non-decreasing along a row
    entry = torch.searchsorted(a.contiguous(), k.expand(a.shape[0], -1).contiguous()) - 1  # last entry with a < k
    inside = entry >= 0
    entry = entry.clamp(min=0)
    group_above, size = a.gather(1, entry), tied.size.gather(1, entry)
    inside &= k < group_above + size
    start, end = group_bounds(ranking.descending)
    members = []
    for v in range(1, ranking.num_levels + 1):
        count = (ranking.levels == v).to(torch.float64).cumsum(1)
        in_group = count.gather(1, end) - count.gather(1, start) + (ranking.levels.gather(1, start) == v).double()
        members.append(torch.where(inside, in_group.gather(1, entry), 0.0))
    return torch.where(inside, size, 1.0), torch.where(inside, k - group_above, 0.0), torch.stack(members, -1)


def _expected_min(top: Tensor, ideal: Tensor, straddle: tuple[Tensor, Tensor, Tensor], level: int) -> Tensor:
    """``E[min(top + Y, ideal)]`` with ``Y`` hypergeometric: ``drawn`` of ``size`` items, ``members`` of level v."""
    size, drawn, members = straddle[0], straddle[1], straddle[2][..., level - 1]
    others = size - members
    log_total = torch.lgamma(size + 1) - torch.lgamma(drawn + 1) - torch.lgamma(size - drawn + 1)
    expected = torch.zeros_like(top)
    for y in range(int(members.max()) + 1 if members.numel() else 1):
        rest = drawn - y
        possible = (y <= members) & (rest >= 0) & (rest <= others)
        log_p = (torch.lgamma(members + 1) - math.lgamma(y + 1) - torch.lgamma((members - y).clamp(min=0.0) + 1)
                 + torch.lgamma(others + 1) - torch.lgamma(rest.clamp(min=0.0) + 1)
                 - torch.lgamma((others - rest).clamp(min=0.0) + 1) - log_total)
        expected += torch.where(possible, torch.exp(log_p), 0.0) * torch.minimum(top + y, ideal)
    return expected
