"""Ranks of the positives of each query, without sorting the retrieval set ([spec §0–1][spec-conventions]).

Every binary retrieval metric is a function of a few numbers per positive ``k`` (:mod:`ranklit.functional.ties`)::

    a + n = #{j in Omega : s_j >= s_k}     (the items scoring at least as high: above and in its tie group)
    a     = #{j in Omega : s_j >  s_k}     (needed by the "average" and "optimistic" tie policies only)

and of the positives' own scores, so only the positives need ordering: sorting the ``R`` positives of a query and
counting, for each of them, the items of the row that score at least as high costs ``O(N log R)`` instead of the
``O(N log N)`` of a full sort, and ``O(N + M R)`` when only ``M`` items score at least as high as the lowest positive
(:func:`count_at_least`).

Items removed from a query's ranking (the query itself, junk) carry the score ``-inf``: they never count in a rank and
are never positives.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ranklit.functional.ties import strictly_above_thresholds, tie_positives

__all__ = [
    "SortedKeys",
    "count_at_least",
    "counts_from_items",
    "items_at_least",
    "lowest_thresholds",
    "positive_counts",
    "positive_ranks",
    "sort_positive_scores",
]


class SortedKeys:
    """The retrieval set's keys (a label column or the ids) sorted once, to find each query's matches in ``O(log N)``.

    Items sharing a key form a contiguous run of the sorted order, so the matches of a query are a slice: no
    ``[Q, N]`` comparison is needed.

    Args:
        keys: ``[N]`` integer keys of the retrieval set.

    Example:
        >>> index, valid = SortedKeys(torch.tensor([3, 1, 3, 2])).match(torch.tensor([3, 5]))
        >>> index.tolist(), valid.tolist()
        ([[0, 2], [0, 0]], [[True, True], [False, False]])
    """

    def __init__(self, keys: Tensor) -> None:
        self.keys, self.order = torch.sort(keys, stable=True)

    def count(self, query_keys: Tensor) -> Tensor:
        """``[C]`` number of retrieval-set items whose key equals each query's key."""
        query_keys = query_keys.contiguous()
        return torch.searchsorted(self.keys, query_keys, right=True) - torch.searchsorted(self.keys, query_keys)

    def match(self, query_keys: Tensor) -> tuple[Tensor, Tensor]:
        """Columns whose key equals each query's key.

        Args:
            query_keys: ``[C]`` integer keys of a chunk of queries.

        Returns:
            ``(index, valid)``, both ``[C, W]`` with ``W`` the largest number of matches of a query; ``index`` holds
            retrieval-set columns (padding points at column 0), ``valid`` says which entries are real.
        """
        query_keys = query_keys.contiguous()
        start = torch.searchsorted(self.keys, query_keys)
        count = self.count(query_keys)
        width = int(count.max()) if count.numel() else 0
        offsets = torch.arange(width, device=query_keys.device)
        valid = offsets[None, :] < count[:, None]
        position = (start[:, None] + offsets[None, :]).clamp(max=max(self.keys.numel() - 1, 0))
        index = torch.where(valid, self.order[position], torch.zeros_like(position))
        return index, valid


def sort_positive_scores(scores: Tensor, index: Tensor, valid: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The scores of each query's positives in decreasing order, and their ranks among the positives.

    Args:
        scores: ``[C, N]`` scores of a chunk of queries; removed items hold ``-inf``.
        index: ``[C, P]`` columns of the candidate positives (see :meth:`SortedKeys.match`).
        valid: ``[C, P]`` which entries of ``index`` are real; positives scoring ``-inf`` (removed) are dropped.

    Returns:
        ``(descending, rank_pos, valid, order)``, each ``[C, W]`` with ``W`` the most positives of a query: the
        positives' scores sorted in decreasing order (``-inf`` after the real ones), ``rank+`` of each (``0`` where not
        real), which entries are real, and where each sorted entry was in ``index`` (to sort anything else alike).

    Example:
        >>> s = torch.tensor([[0.9, 0.5, 0.7, 0.5, 0.1]])
        >>> out = sort_positive_scores(s, torch.tensor([[4, 3, 0]]), torch.ones(1, 3, dtype=torch.bool))
        >>> descending, rank_pos, ok, order = out
        >>> descending.tolist(), rank_pos.tolist(), order.tolist()
        ([[0.8999999761581421, 0.5, 0.10000000149011612]], [[1, 2, 3]], [[2, 1, 0]])
    """
    positive_scores = scores.gather(1, index)
    valid = valid & torch.isfinite(positive_scores)
    num_positives = valid.sum(dim=1, keepdim=True)
    width = int(num_positives.max()) if num_positives.numel() else 0
    descending, order = torch.where(valid, positive_scores, float("-inf")).sort(dim=1, descending=True)
    descending, order = descending[:, :width].contiguous(), order[:, :width]
    valid = torch.arange(width, device=scores.device)[None, :] < num_positives  # real positives first, then -inf
    rank_pos = width - torch.searchsorted(descending.flip(1).contiguous(), descending)  # positives not strictly below
    return descending, torch.where(valid, rank_pos, 0), valid, order


def count_at_least(scores: Tensor, thresholds: Tensor, *, transposed: bool = False) -> Tensor:
    """``#{j : scores[c, j] >= thresholds[c, i]}`` for each row ``c`` and threshold ``i``, without sorting the rows.

    Three exact ways, picked by their estimated cost (the counts never depend on the choice; tested):

    * on CPU, when few items clear a row's lowest threshold (the usual case: embeddings put the positives near the
      top), one comparison pass finds those items and each is placed among its row's thresholds
      (``O(C N + M P)`` for ``M`` such items; :func:`items_at_least`, :func:`counts_from_items`);
    * else, with few thresholds (``P <= 64``), one vectorised comparison pass over the row per threshold
      (``O(C N P)``; always on GPU);
    * else a binary search of every item among the thresholds and a histogram (``O(C N log P)``).

    Args:
        scores: ``[C, N]`` scores, or ``[N, C]`` (one query per column) when ``transposed``.
        thresholds: ``[C, P]`` thresholds of each query in decreasing order; ``-inf`` entries are padding (their
            counts are not meaningful).
        transposed: the queries are the columns of ``scores`` (the other half of a symmetric tile).

    Returns:
        ``[C, P]`` int64 counts.

    Example:
        >>> s = torch.tensor([[0.9, 0.5, 0.7, 0.5, 0.1]])
        >>> count_at_least(s, torch.tensor([[0.7, 0.5]])).tolist()
        [[2, 4]]
        >>> count_at_least(s.T, torch.tensor([[0.7]]), transposed=True).tolist()
        [[2]]
    """
    counts = None if scores.is_cuda else _count_at_least_above_lowest(scores, thresholds, transposed)
    if counts is not None:
        return counts
    if thresholds.shape[1] <= _MAX_PASSES:
        return _count_at_least_by_passes(scores, thresholds, transposed)
    return _count_at_least_by_search(scores.T.contiguous() if transposed else scores, thresholds)


def positive_counts(
    scores: Tensor, index: Tensor, valid: Tensor, *, strict: bool = False
) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """The positives of each query by decreasing score, and the items scoring at least as high as each.

    Args:
        scores: ``[C, N]`` scores of a chunk of queries; removed items hold ``-inf``.
        index: ``[C, P]`` columns of the candidate positives (see :meth:`SortedKeys.match`).
        valid: ``[C, P]`` which entries of ``index`` are real; positives scoring ``-inf`` (removed) are dropped.
        strict: also count the items scoring strictly higher (for the ``"average"`` and ``"optimistic"`` ties).

    Returns:
        ``(descending, valid, at_least, above)``, each ``[C, W]`` with ``W`` the most positives of a query: the
        positives' scores in decreasing order, which entries are real (first in each row), ``#{j : s_j >= s}`` and
        ``#{j : s_j > s}`` (``None`` unless ``strict``) as int64.

    Memory: ``O(C * N)``.
    """
    descending, _, valid, _ = sort_positive_scores(scores, index, valid)
    at_least = torch.where(valid, count_at_least(scores, descending), 0)
    above = None
    if strict:
        above = torch.where(valid, count_at_least(scores, strictly_above_thresholds(descending)), 0)
    return descending, valid, at_least, above


def positive_ranks(scores: Tensor, index: Tensor, valid: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Pessimistic ``rank`` and ``rank+`` of the positives of each query, positives ordered by decreasing score.

    Pessimistic: the worst ordering of each group of equal scores, its negatives first, then its positives one after
    the other ([spec §0][spec-ties]).

    Args:
        scores, index, valid: as for :func:`positive_counts`.

    Returns:
        ``(rank, rank_pos, valid)``, each ``[C, W]`` int64 (``0`` where not real); real entries come first in a row.

    Example:
        >>> s = torch.tensor([[0.9, 0.5, 0.7, 0.5, 0.1]])
        >>> rank, rank_pos, ok = positive_ranks(s, torch.tensor([[0, 3, 4]]), torch.tensor([[True, True, True]]))
        >>> rank.tolist(), rank_pos.tolist()
        ([[1, 4, 5]], [[1, 2, 3]])
    """
    descending, valid, at_least, _ = positive_counts(scores, index, valid)
    tied = tie_positives(descending, valid, at_least, None, "pessimistic")
    assert tied.rank is not None and tied.rank_pos is not None
    return torch.where(valid, tied.rank, 0).long(), torch.where(valid, tied.rank_pos, 0).long(), valid


_MAX_PASSES = 64
# Costs on CPU in units of one comparison pass over an item (measured on 1024 x 1024 tiles with 9 thresholds a row,
# torch 2.14): finding the items that clear a bound costs about 4 passes per item of the tile, placing one such item
# among its row's thresholds about 50.
_FIND_COST, _PLACE_COST = 4.0, 50.0
_SAMPLE_STEP = 8  # the share of items that clear the bound is estimated on every 8th row


def lowest_thresholds(thresholds: Tensor) -> Tensor:
    """``[C]`` lowest real threshold of each row of decreasing ``[C, W]`` thresholds (``+inf`` for a row of padding).

    >>> lowest_thresholds(torch.tensor([[0.9, 0.4, float("-inf")], [float("-inf")] * 3])).tolist()
    [0.4000000059604645, inf]
    """
    if thresholds.shape[1] == 0:
        return thresholds.new_full(thresholds.shape[:1], torch.inf)
    num_real = torch.isfinite(thresholds).sum(1)
    lowest = thresholds.gather(1, (num_real - 1).clamp(min=0)[:, None]).squeeze(1)
    return torch.where(num_real > 0, lowest, torch.inf)


def items_at_least(
    scores: Tensor, bound: Tensor, passes: float, placements: int = 1
) -> tuple[Tensor, Tensor] | None:
    """``([M, 2] (row, column), [M] value)`` of the entries of ``scores`` at least ``bound`` (broadcast), or ``None``
    when they are too many: when finding them and placing each of them ``placements`` times
    (:func:`counts_from_items`) would cost more than ``passes`` comparison passes over ``scores``.

    >>> where, values = items_at_least(torch.tensor([[0.9, 0.1], [0.2, 0.7]]), torch.tensor([[0.5], [0.1]]), 50.0)
    >>> where.tolist(), values.tolist()
    ([[0, 0], [1, 0], [1, 1]], [0.8999999761581421, 0.20000000298023224, 0.699999988079071])
    """
    if passes <= _FIND_COST:
        return None
    sample = scores[::_SAMPLE_STEP], bound[::_SAMPLE_STEP] if bound.shape[0] > 1 else bound  # every 8th row
    fraction = int(torch.count_nonzero(torch.ge(*sample))) / max(sample[0].numel(), 1)
    if _FIND_COST + _PLACE_COST * placements * fraction > passes:
        return None
    where = torch.nonzero(torch.ge(scores, bound))
    return where, scores[where[:, 0], where[:, 1]]


def counts_from_items(rows: Tensor, values: Tensor, thresholds: Tensor) -> Tensor:
    """``[C, W]`` counts ``#{m : rows[m] = c, values[m] >= thresholds[c, i]}`` of decreasing ``[C, W]`` thresholds.

    The thresholds at or below an item are a suffix of its row: the counts are the cumulative histogram of where each
    item's suffix starts, ``O(M W)`` for ``M`` items. ``-inf`` padding gets an arbitrary count (never read).

    >>> counts_from_items(torch.tensor([0, 0, 0]), torch.tensor([0.9, 0.5, 0.7]), torch.tensor([[0.7, 0.5]])).tolist()
    [[2, 3]]
    """
    num_rows, width = thresholds.shape
    at_or_below = thresholds.index_select(0, rows)
    torch.le(at_or_below, values[:, None], out=at_or_below)  # 1.0 where a threshold is at or below the item
    first = rows * (width + 1) + (width - at_or_below.sum(1)).long()
    histogram = torch.zeros(num_rows * (width + 1), dtype=torch.int64, device=thresholds.device)
    histogram.index_add_(0, first, torch.ones_like(first))
    return histogram.view(num_rows, width + 1)[:, :width].cumsum(1)


def _count_at_least_above_lowest(scores: Tensor, thresholds: Tensor, transposed: bool) -> Tensor | None:
    """:func:`count_at_least` from the items that clear each row's lowest threshold only, or ``None`` when one
    comparison pass per threshold would cost less.

    An item below a row's lowest threshold counts for none of that row's thresholds. Ranking metrics are computed on
    embeddings that put most positives near the top, so few items clear the lowest positive score (about 3 % on the
    benchmark of ``benchmarks/metrics.py``): one comparison pass finds them (:func:`items_at_least`), and
    :func:`counts_from_items` places them among the thresholds: ``O(N + M W)`` per row for ``M`` such items instead
    of ``O(N W)``.
    """
    lowest = lowest_thresholds(thresholds)
    found = items_at_least(scores, lowest[None, :] if transposed else lowest[:, None], thresholds.shape[1])
    if found is None:
        return None
    where, values = found
    return counts_from_items(where[:, 1] if transposed else where[:, 0], values, thresholds)


def _count_at_least_by_passes(scores: Tensor, thresholds: Tensor, transposed: bool = False) -> Tensor:
    """:func:`count_at_least` by one vectorised comparison pass per threshold (``-inf`` padding gets no pass).

    On CPU the rows are processed in tiles of about 4 MiB (at least 32 rows), so that the passes over a tile run from
    the cache (about 4x faster than streaming the whole chunk from memory once per threshold); a transposed input is
    one tile (callers pass cache-sized tiles).
    """
    num_rows, width = thresholds.shape
    num_items = scores.shape[0] if transposed else scores.shape[1]
    exact = torch.float64 if num_items >= 2**24 else scores.dtype  # sums of ones stay exact
    tile = num_rows if scores.is_cuda or transposed else max(_MIN_TILE_ROWS, _TILE_ELEMENTS // max(num_items, 1))
    counts = torch.zeros(width, num_rows, dtype=exact, device=scores.device)
    by_pass = thresholds.T.contiguous()  # [P, C]: the thresholds of one pass are contiguous
    passes = torch.isfinite(thresholds).sum(1)
    flags_shape = scores.shape if transposed else (min(tile, num_rows), num_items)
    flags = torch.empty(flags_shape, dtype=exact, device=scores.device)
    for start in range(0, num_rows, tile):
        stop = min(start + tile, num_rows)
        block = scores if transposed else scores[start:stop]
        block_flags = flags if transposed else flags[: stop - start]
        # thresholds are sorted with the -inf padding last: the padding needs no pass (its counts are never read)
        for i in range(int(passes[start:stop].max())):
            level = by_pass[i, start:stop]
            # an expanded threshold operand keeps `ge` vectorised (a plain broadcast row is 10x slower on CPU)
            torch.ge(block, (level[None, :] if transposed else level[:, None]).expand(block.shape), out=block_flags)
            torch.sum(block_flags, dim=0 if transposed else 1, out=counts[i, start:stop])  # exact below 2^24 ones
    return counts.T.round().long()


_TILE_ELEMENTS = 2**20
_MIN_TILE_ROWS = 32  # fewer rows make each pass's `ge` and `mv` too small to run efficiently


def _count_at_least_by_search(scores: Tensor, descending: Tensor) -> Tensor:
    """Same as :func:`_count_at_least_by_passes` for sorted thresholds, by binary search and a histogram."""
    width = descending.shape[1]
    # below[c, j] = #{i : ascending[c, i] <= s_j}; the item counts for the thresholds at ascending positions < below.
    below = torch.searchsorted(descending.flip(1).contiguous(), scores.contiguous(), right=True)
    histogram = torch.zeros(scores.shape[0], width + 1, dtype=torch.int64, device=scores.device)
    histogram.scatter_add_(1, below, below.new_ones(1).expand_as(below))
    return histogram[:, 1:].flip(1).cumsum(1)
