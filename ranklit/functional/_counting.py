"""How many items of each row score at least each of a few thresholds, exactly and without sorting the rows.

This counting is most of the cost of the binary metrics beyond the score product
(:mod:`ranklit.functional.positive_ranks`): the thresholds are the scores of a query's positives, the counts their
pessimistic ranks. :func:`count_at_least` picks the cheapest of three exact ways by an estimate of their costs.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["count_at_least", "counts_from_items", "items_at_least", "lowest_thresholds"]


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
    first = rows * (width + 1) + (width - torch.mv(at_or_below, at_or_below.new_ones(width))).long()  # exact sums
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
