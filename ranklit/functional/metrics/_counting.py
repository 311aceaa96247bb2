"""How many items of each row score at least each of a few thresholds, exactly and without sorting the rows.

This counting is most of the cost of the binary metrics beyond the score product
(:mod:`ranklit.functional.metrics._positive_ranks`): the thresholds are the scores of a query's positives, the counts
their pessimistic ranks. :func:`count_at_least` picks the cheapest of three exact ways by an estimate of their costs.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ranklit.functional.metrics import _binned_counts
from ranklit.functional.metrics._binned_counts import lowest_thresholds

__all__ = ["count_at_least", "counts_from_items", "items_at_least", "lowest_thresholds", "worth_finding"]


def count_at_least(scores: Tensor, thresholds: Tensor, *, transposed: bool = False) -> Tensor:
    """``#{j : scores[c, j] >= thresholds[c, i]}`` for each row ``c`` and threshold ``i``, without sorting the rows.

    Four exact ways, picked by their estimated cost and the device (the counts never depend on the choice; tested):

    * on CPU, when few items clear a row's lowest threshold (the usual case: embeddings put the positives near the
      top), one comparison pass finds those items and each is placed among its row's thresholds
      (``O(C N + M P)`` for ``M`` such items; :func:`items_at_least`, :func:`counts_from_items`);
    * else, with few thresholds (``P <= 64``), one vectorised comparison pass over the row per threshold
      (``O(C N P)``; always on GPU);
    * else, on CPU, a histogram of score bins, exact comparisons only for the items sharing a bin with a threshold
      (``O(C N)``; :func:`~ranklit.functional.metrics._binned_counts.count_at_least_by_bins`);
    * else (GPU) a binary search of every item among the thresholds and a histogram (``O(C N log P)``).

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
    counts = _count_at_least_above_lowest(scores, thresholds, transposed)
    if counts is not None:
        return counts
    if thresholds.shape[1] <= _MAX_PASSES:
        return _count_at_least_by_passes(scores, thresholds, transposed)
    rows = scores.T.contiguous() if transposed else scores
    if scores.is_cuda:
        return _count_at_least_by_search(rows, thresholds)
    return _binned_counts.count_at_least_by_bins(rows, thresholds)


_MAX_PASSES = 64
# Costs on CPU in units of one comparison pass over an item (measured on 1024 x 1024 tiles, torch 2.14, one thread):
# finding the items that clear a bound costs about 4.5 per item of the tile; placing one found item among W thresholds
# about 5 + 4 W; counting by score bins (W > 64) about 25 per item of the tile (binary search: 40 + 8 log2(W)).
_FIND_COST, _PLACE_BASE, _PLACE_PER_THRESHOLD = 4.5, 5.0, 4.0
_BINNED_COST = 25.0
_SAMPLE_STEP = 8  # the share of items that clear the bound is estimated on every 8th row
_BLOCK_ELEMENTS = 2**22  # rows of a query chunk are searched in blocks of about 4 M scores (bounded memory)
_PLACE_ELEMENTS = 2**20  # found items are placed in groups of about 1 M (item, threshold) pairs


def worth_finding(scores: Tensor, bound: Tensor, widths: Sequence[int]) -> bool:
    """Whether finding the entries of ``scores`` at least ``bound`` (broadcast) and placing each of them among
    thresholds of each of ``widths`` costs less than counting every entry for those thresholds (a comparison pass per
    threshold, or a binary search beyond 64). The share of such entries is estimated on every 8th row.

    >>> scores = torch.arange(64.0).view(8, 8)
    >>> worth_finding(scores, torch.full((8, 1), 62.0), [8]), worth_finding(scores, torch.zeros(8, 1), [8])
    (True, False)
    """
    counting = sum(float(w) if w <= _MAX_PASSES else _BINNED_COST for w in widths)
    if scores.is_cuda or counting <= _FIND_COST:
        return False
    sample = scores[::_SAMPLE_STEP], bound[::_SAMPLE_STEP] if bound.shape[0] > 1 else bound
    share = int(torch.count_nonzero(torch.ge(*sample))) / max(sample[0].numel(), 1)
    return _FIND_COST + share * sum(_PLACE_BASE + _PLACE_PER_THRESHOLD * w for w in widths) < counting


def items_at_least(scores: Tensor, bound: Tensor) -> tuple[Tensor, Tensor]:
    """``([M, 2] (row, column), [M] value)`` of the entries of ``scores`` at least ``bound`` (broadcast), row by row.

    >>> where, values = items_at_least(torch.tensor([[0.9, 0.1], [0.2, 0.7]]), torch.tensor([[0.5], [0.1]]))
    >>> where.tolist(), values.tolist()
    ([[0, 0], [1, 0], [1, 1]], [0.8999999761581421, 0.20000000298023224, 0.699999988079071])
    """
    if not scores.is_contiguous():
        where = torch.nonzero(torch.ge(scores, bound))
        return where, scores[where[:, 0], where[:, 1]]
    flat = torch.nonzero(torch.ge(scores, bound).view(-1)).squeeze(1)  # cheaper than [M, 2] indices, a 2-d gather
    rows = torch.div(flat, max(scores.shape[1], 1), rounding_mode="floor")
    return torch.stack((rows, flat - rows * scores.shape[1]), 1), scores.view(-1).index_select(0, flat)


def counts_from_items(rows: Tensor, values: Tensor, thresholds: Tensor) -> Tensor:
    """``[C, W]`` counts ``#{m : rows[m] = c, values[m] >= thresholds[c, i]}`` of decreasing ``[C, W]`` thresholds.

    The thresholds at or below an item are a suffix of its row: the counts are the cumulative histogram of where each
    item's suffix starts, ``O(M W)`` for ``M`` items (placed in groups: memory ``O(C W + 2^20)``). ``-inf`` padding
    gets an arbitrary count (never read).

    >>> counts_from_items(torch.tensor([0, 0, 0]), torch.tensor([0.9, 0.5, 0.7]), torch.tensor([[0.7, 0.5]])).tolist()
    [[2, 3]]
    """
    num_rows, width = thresholds.shape
    histogram = torch.zeros(num_rows * (width + 1), dtype=torch.int64, device=thresholds.device)
    ones = thresholds.new_ones(width)
    group = max(1, _PLACE_ELEMENTS // max(width, 1))
    for start in range(0, rows.numel(), group):
        group_rows, group_values = rows[start : start + group], values[start : start + group]
        at_or_below = thresholds.index_select(0, group_rows)
        torch.le(at_or_below, group_values[:, None], out=at_or_below)  # 1.0 where a threshold is at or below
        first = group_rows * (width + 1) + (width - torch.mv(at_or_below, ones)).long()  # sums of ones: exact
        histogram.index_add_(0, first, torch.ones_like(first))
    return histogram.view(num_rows, width + 1)[:, :width].cumsum(1)


def _count_at_least_above_lowest(scores: Tensor, thresholds: Tensor, transposed: bool) -> Tensor | None:
    """:func:`count_at_least` from the items that clear each row's lowest threshold only, or ``None`` when counting
    every item costs less (:func:`worth_finding`).

    An item below a row's lowest threshold counts for none of that row's thresholds. Ranking metrics are computed on
    embeddings that put most positives near the top, so few items clear the lowest positive score (about 3 % on the
    benchmark of ``benchmarks/metrics.py``): one comparison pass finds them (:func:`items_at_least`), and
    :func:`counts_from_items` places them among the thresholds: ``O(N + M W)`` per row for ``M`` such items instead
    of ``O(N W)``.
    """
    lowest = lowest_thresholds(thresholds)
    bound = lowest[None, :] if transposed else lowest[:, None]
    if not worth_finding(scores, bound, [thresholds.shape[1]]):
        return None
    if transposed:  # a tile of the symmetric path: already cache-sized
        where, values = items_at_least(scores, bound)
        return counts_from_items(where[:, 1], values, thresholds)
    step = max(1, _BLOCK_ELEMENTS // max(scores.shape[1], 1))
    blocks = []
    for start in range(0, scores.shape[0], step):
        where, values = items_at_least(scores[start : start + step], bound[start : start + step])
        blocks.append(counts_from_items(where[:, 0], values, thresholds[start : start + step]))
    return torch.cat(blocks) if blocks else thresholds.new_zeros(thresholds.shape, dtype=torch.int64)


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
