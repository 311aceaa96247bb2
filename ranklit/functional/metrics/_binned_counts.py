"""Exact counts of the items at or above many thresholds per row, by a histogram of score bins (CPU).

With hierarchical labels a query has about as many thresholds as relevant items (a hundred on the benchmark of
``benchmarks/metrics.py``), and half of a row scores above the lowest of them: neither one comparison pass per
threshold nor placing the items found above the lowest one is cheap, and a binary search of every item costs about
14 ns per item. Here each item costs a handful of vectorised passes instead:

* every score ``s`` of row ``c`` gets a bin ``g_c(s) = trunc(clamp((s - lo_c) * a_c, -1, B) + 1)`` with ``lo_c`` the
  row's lowest threshold and ``a_c`` spreading its thresholds over ``B`` bins. Each step is a correctly rounded
  float operation, so ``g_c`` is non-decreasing, and the thresholds get their bins by the same operations: an item in
  a higher (lower) bin than a threshold scores strictly higher (lower). The counts of the items in other bins than
  their row's thresholds come from a histogram of the bins and its suffix sums;
* the items in a bin that holds a threshold (few: ``B`` is much larger than the number of thresholds) are compared
  with the thresholds exactly (:func:`~ranklit.functional.metrics._counting.counts_from_items`).

So the counts are exactly those of a comparison of every item with every threshold (tested against it).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["count_at_least_by_bins", "lowest_thresholds"]

_BINS = 4096  # bins between a row's lowest and highest threshold
_TILE_ELEMENTS = 2**19  # rows are binned in tiles of about 2 MiB of scores (they stay in the cache between passes)


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


def count_at_least_by_bins(scores: Tensor, thresholds: Tensor) -> Tensor:
    """``#{j : scores[c, j] >= thresholds[c, i]}`` for each row ``c`` and threshold ``i``, by binning the scores.

    Cost per item: five element-wise passes, a histogram and a look-up over a cache-sized tile; plus
    ``O(W)`` per item that shares a bin with one of its row's ``W`` thresholds. Memory ``O(tile + C W + C B)``.

    Args:
        scores: ``[C, N]`` float scores (``-inf`` for removed items).
        thresholds: ``[C, W]`` thresholds of each row in decreasing order, ``-inf`` padding last (its counts are not
            meaningful).

    Returns:
        ``[C, W]`` int64 counts.

    Example:
        >>> s = torch.tensor([[0.9, 0.5, 0.7, 0.5, 0.1, float("-inf")]])
        >>> count_at_least_by_bins(s, torch.tensor([[0.7, 0.5, 0.1]])).tolist()
        [[2, 4, 5]]
    """
    num_rows, num_items = scores.shape
    width = thresholds.shape[1]
    counts = torch.zeros(num_rows, width, dtype=torch.int64, device=scores.device)
    if num_rows == 0 or width == 0 or num_items == 0:
        return counts
    span = _BINS + 2  # bins 0 (below the lowest threshold) .. B + 1 (clamped above) of one row
    tile = max(1, min(num_rows, _TILE_ELEMENTS // num_items, 2**24 // span - 1))  # row offsets stay exact in float32
    lowest = lowest_thresholds(thresholds)
    real = torch.isfinite(lowest)
    spread = thresholds[:, 0] - lowest
    usable = real & torch.isfinite(spread) & (spread > 0)
    # the highest threshold lands in bin B or below (never in the clamped top bin B + 1); the factor is positive
    scale = torch.where(usable, (_BINS - 1) / torch.where(usable, spread, 1.0), 1.0).clamp(min=1e-30, max=1e30)
    base = torch.where(real, lowest, 0.0)
    flags = scores.new_empty(min(tile, num_rows), num_items)
    bins = torch.empty(flags.shape, dtype=torch.int32, device=scores.device)
    offsets = (torch.arange(tile, device=scores.device, dtype=scores.dtype) * span + 1.0)[:, None]
    for start in range(0, num_rows, tile):
        stop = min(start + tile, num_rows)
        rows = stop - start
        shift, factor, offset = base[start:stop, None], scale[start:stop, None], offsets[:rows]
        item_bins = _bins(scores[start:stop], shift, factor, offset, out=flags[:rows], int_out=bins[:rows]).view(-1)
        block_thresholds = thresholds[start:stop]
        threshold_bins = _bins(block_thresholds, shift, factor, offset).long()
        # items in a strictly higher bin than a threshold: the row's items less those in its bin or lower
        at_or_below = torch.bincount(item_bins, minlength=rows * span).view(rows, span).cumsum(1)
        local = (threshold_bins - (offset.long() - 1)).clamp(0, span - 1)
        counts[start:stop] = num_items - at_or_below.gather(1, local)
        counts[start:stop] += _same_bin_counts(
            scores[start:stop], item_bins, block_thresholds, threshold_bins, torch.isfinite(block_thresholds)
        )
    return counts


def _same_bin_counts(
    scores: Tensor, item_bins: Tensor, thresholds: Tensor, threshold_bins: Tensor, real: Tensor
) -> Tensor:
    """``[C, W]`` ``#{j : bin(s_j) = bin(t_i), s_j >= t_i}``: the items sharing a bin with a threshold, compared.

    A row's thresholds are decreasing, so those of one bin are consecutive, entries ``first .. first + k - 1``; an
    item of that bin at or above the ``g`` of them it is not below counts for the entries ``first + k - g .. first +
    k - 1``: ``+1`` and ``-1`` at the two ends of that run, then a cumulative sum along the row.
    """
    num_rows, width = thresholds.shape
    bins_shape = (num_rows * (_BINS + 2),)
    flat_bins, position = threshold_bins[real], torch.nonzero(real)
    in_bin = torch.zeros(bins_shape, dtype=torch.int64, device=scores.device)
    in_bin.index_add_(0, flat_bins, torch.ones_like(flat_bins))
    first = torch.full(bins_shape, width, dtype=torch.int64, device=scores.device)
    first.scatter_reduce_(0, flat_bins, position[:, 1], reduce="amin")
    shared = torch.nonzero((in_bin > 0).index_select(0, item_bins)).squeeze(1)  # items in a bin holding a threshold
    delta = thresholds.new_zeros(num_rows, width + 1, dtype=torch.int64)
    if shared.numel() == 0:
        return delta[:, :width]
    bins = item_bins.index_select(0, shared)
    rows = torch.div(shared, scores.shape[1], rounding_mode="floor")
    values = scores.reshape(-1).index_select(0, shared)
    start, size = first.index_select(0, bins), in_bin.index_select(0, bins)
    strictly_above = torch.zeros_like(start)  # thresholds of the item's bin scoring strictly higher than the item
    flat, row_start = thresholds.reshape(-1), rows * width
    for r in range(int(size.max())):
        entry = row_start + (start + r).clamp(max=width - 1)
        strictly_above += (r < size) & (flat.index_select(0, entry) > values)
    ends = rows * (width + 1) + start  # the run's first entry, as a position of ``delta``
    changes = torch.cat([ends + strictly_above, ends + size])
    signs = torch.cat([torch.ones_like(rows), torch.full_like(rows, -1)])
    delta.view(-1).index_add_(0, changes, signs)
    return delta.cumsum(1)[:, :width]


def _bins(
    scores: Tensor,
    shift: Tensor,
    factor: Tensor,
    offset: Tensor,
    *,
    out: Tensor | None = None,
    int_out: Tensor | None = None,
) -> Tensor:
    """``trunc(clamp((scores - shift) * factor, -1, B) + offset)`` as int32: non-decreasing in ``scores`` per row."""
    binned = torch.sub(scores, shift, out=out) if out is not None else scores - shift
    binned.mul_(factor).clamp_(-1.0, float(_BINS)).add_(offset)
    if int_out is None:
        return binned.to(torch.int32)
    return int_out.copy_(binned)
