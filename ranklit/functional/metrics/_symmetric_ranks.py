"""Ranks of the positives when the items rank each other: each pair's score is computed once ([spec §1][spec-metrics]).

Without a gallery the score matrix ``S = E E^T`` is symmetric and a query's positives are the other items of its class.
Sorting the items by (class size, label) and cutting that order at class boundaries into blocks of about ``tile`` items
puts every positive of a query in the query's own block (:func:`class_blocks`). Then

* the diagonal tile ``E_I E_I^T`` holds the positives' scores of block ``I`` (the thresholds of
  :func:`~ranklit.functional.metrics._counting.count_at_least`) and their counts inside ``I``;
* an off-diagonal tile ``T = E_I E_J^T`` (``I < J``) holds negatives only. It is computed once and counted twice:
  along its rows for the queries of ``I``, along its columns for the queries of ``J`` (``T^T`` is their tile). On CPU
  one pass finds the items at or above the lowest positive score of their row or of their column, and only those
  are counted (:func:`~ranklit.functional.metrics._counting.count_at_least`), when they are few.

So half of the score matrix is computed, every comparison pass reads a cache-sized tile, and blocks hold classes of
similar size, so few thresholds are padding. A pair's score is one number shared by both of its rows; ties are exact
equalities of the float scores, as in the row-by-row path of
:func:`~ranklit.functional.metrics._retrieval.retrieval_metrics`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator

import torch
from torch import Tensor

from ranklit.functional.metrics._counting import (
    count_at_least,
    counts_from_items,
    items_at_least,
    lowest_thresholds,
    worth_finding,
)
from ranklit.functional.metrics._positive_ranks import SortedKeys, sort_positive_scores
from ranklit.functional.metrics._sharding import QueryShard
from ranklit.functional.ties import strictly_above_thresholds

__all__ = ["class_blocks", "symmetric_positive_counts", "symmetric_tile_size"]

_CPU_TILE = 1024  # a 4 MiB float32 tile: the tile and its comparison flags stay in the cache


def symmetric_tile_size(num_items: int, device: torch.device) -> int:
    """Items per block: 1024 on CPU (cache-sized tiles); on GPU as large as a quarter of the free memory allows.

    A step holds one ``tile x tile`` block of scores and its comparison flags.

    >>> symmetric_tile_size(100_000, torch.device("cpu"))
    1024
    """
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return max(1, min(num_items, int((free // 4 // 16) ** 0.5)))
    return max(1, min(num_items, _CPU_TILE))


def class_blocks(labels: Tensor, tile: int) -> tuple[Tensor, list[tuple[int, int]]]:
    """Order of the items by (class size, label) and ``[start, stop)`` blocks of that order holding whole classes.

    A block starts at the first class boundary at or after each multiple of ``tile``: blocks hold about ``tile``
    items, or one class when it is larger.

    Args:
        labels: ``[N]`` integer labels.
        tile: target items per block.

    Returns:
        ``(order, blocks)``: ``order[k]`` is the item at position ``k`` of the sorted order; ``blocks`` the bounds.

    Example:
        >>> order, blocks = class_blocks(torch.tensor([5, 7, 5, 9, 7, 7]), tile=2)
        >>> order.tolist(), blocks
        ([3, 0, 2, 1, 4, 5], [(0, 3), (3, 6)])
    """
    _, inverse, sizes = torch.unique(labels, return_inverse=True, return_counts=True)
    by_label = torch.argsort(inverse, stable=True)
    order = by_label[torch.argsort(sizes[inverse[by_label]], stable=True)]
    sorted_labels = inverse[order]
    new_class = torch.ones_like(sorted_labels, dtype=torch.bool)
    new_class[1:] = sorted_labels[1:] != sorted_labels[:-1]
    starts = torch.nonzero(new_class).flatten()
    marks = torch.searchsorted(starts, torch.arange(0, labels.numel(), tile, device=labels.device))
    cuts = [*torch.unique(starts[marks[marks < starts.numel()]]).tolist(), labels.numel()]
    return order, list(itertools.pairwise(cuts))


def symmetric_positive_counts(
    embeddings: Tensor, labels: Tensor, tile: int, *, strict: bool = False, shard: QueryShard | None = None
) -> Iterator[tuple[Tensor, Tensor, Tensor, Tensor, Tensor | None]]:
    """The positives of every item ranking all the others (itself excluded), and their counts, by blocks.

    Args:
        embeddings: ``[N, D]`` embeddings (score = dot product).
        labels: ``[N]`` integer labels; positives share the query's label.
        tile: target items per block (:func:`class_blocks`); every process of a ``shard`` must pass the same.
        strict: also count the items scoring strictly higher (``"average"`` and ``"optimistic"`` ties).
        shard: split the work across processes without duplicating any: process ``r`` computes the diagonal tiles
            of the blocks ``r, r + W, ...`` and every ``W``-th off-diagonal tile pair; the positives' scores
            (diagonal tiles) and the integer counts are all-reduced (sums of one value and zeros: exact), and each
            process then yields its own blocks only. The counts, hence every metric, are exactly those of one
            process.

    Yields:
        For each block (of this process), ``(rows, descending, valid, at_least, above)``: the queries' positions in
        ``embeddings`` and, as :func:`~ranklit.functional.metrics._positive_ranks.positive_counts` returns them, their
        positives' scores in decreasing order, which are real, and the counts (``above`` is ``None`` unless
        ``strict``).

    Cost: ``N^2 D / 2`` multiply-adds (``/ W`` per process with a shard); memory ``O(tile^2 + N P)`` with ``P`` the
    most positives of a query.

    Example:
        >>> e = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.6, 0.8], [0.0, 1.0]])
        >>> blocks = symmetric_positive_counts(e, torch.tensor([0, 1, 0, 1]), 2)
        >>> [(rows.tolist(), n.tolist()) for rows, _, _, n, _ in blocks]
        [([0, 2], [[2], [3]]), ([1, 3], [[3], [2]])]

        The blocks are the classes ``{0, 2}`` and ``{1, 3}``: item 2 has items 1 and 3 above its positive 0.
    """
    order, blocks = class_blocks(labels, tile)
    embeddings, labels = embeddings[order], labels[order]
    tiles = _Tiles(embeddings, max(stop - start for start, stop in blocks))
    world_size, rank = (1, 0) if shard is None else (shard.world_size, shard.rank)
    thresholds, real, counts = [], [], []
    for i, (start, stop) in enumerate(blocks):
        block_labels = labels[start:stop]
        if i % world_size == rank:
            tiles.load_rows(start, stop)
            tiles.load_columns(start, stop)
            diagonal = tiles.product()
            diagonal.diagonal().fill_(float("-inf"))  # a query never ranks itself
            descending, _, valid, _ = sort_positive_scores(diagonal, *SortedKeys(block_labels).match(block_labels))
            counts.append(_counts(diagonal, descending, strict))
        else:  # another process computes this diagonal tile: zeros, completed by the all-reduce
            others = SortedKeys(block_labels).count(block_labels) - 1
            width = int(others.max())
            valid = torch.arange(width, device=labels.device)[None, :] < others[:, None]
            descending = embeddings.new_zeros(stop - start, width)
            counts.append(descending.new_zeros((1 + strict, *descending.shape), dtype=torch.int64))
        thresholds.append(descending)
        real.append(valid)
    if shard is not None:
        thresholds = _all_reduce(shard, thresholds)
    with_strict = [_with_strict(d, strict) for d in thresholds]
    lowest = [lowest_thresholds(d) for d in thresholds]  # per block, once for all its tiles
    if shard is None:
        for i, (start, stop) in enumerate(blocks):
            _count_negatives(tiles, blocks, with_strict, lowest, counts, i, range(i + 1, len(blocks)))
            yield order[start:stop], thresholds[i], real[i], *_split(counts[i], real[i], strict)
        return
    pair = 0
    for i in range(len(blocks)):
        mine = [j for j in range(i + 1, len(blocks)) if (pair + j - i - 1) % world_size == rank]
        pair += len(blocks) - i - 1
        _count_negatives(tiles, blocks, with_strict, lowest, counts, i, mine)
    counts = _all_reduce(shard, counts)
    for i, (start, stop) in enumerate(blocks):
        if i % world_size == rank:
            yield order[start:stop], thresholds[i], real[i], *_split(counts[i], real[i], strict)


def _with_strict(descending: Tensor, strict: bool) -> Tensor:
    """``[1 or 2, B, W]`` thresholds: "at least" and, with ``strict``, "strictly above"."""
    if not strict:
        return descending[None]
    return torch.stack([descending, strictly_above_thresholds(descending)])


def _counts(scores: Tensor, descending: Tensor, strict: bool) -> Tensor:
    return torch.stack([count_at_least(scores, d) for d in _with_strict(descending, strict)])


def _split(counts: Tensor, valid: Tensor, strict: bool) -> tuple[Tensor, Tensor | None]:
    at_least = torch.where(valid, counts[0], 0)
    return at_least, torch.where(valid, counts[1], 0) if strict else None


def _all_reduce(shard: QueryShard, tensors: list[Tensor]) -> list[Tensor]:
    """The element-wise sums over the processes of a list of same-dtype tensors (one collective)."""
    flat = shard.all_reduce_sum(torch.cat([t.flatten() for t in tensors]))
    return [part.view_as(t) for part, t in zip(flat.split([t.numel() for t in tensors]), tensors, strict=True)]


def _count_negatives(
    tiles: _Tiles,
    blocks: list[tuple[int, int]],
    thresholds: list[Tensor],
    lowest: list[Tensor],
    counts: list[Tensor],
    i: int,
    columns: Iterable[int],
) -> None:
    """Add the items of blocks ``columns`` (all ``> i``) to the counts of block ``i`` and theirs to block ``i``'s.

    ``thresholds[b]`` and ``counts[b]`` are ``[S, B, W]``: one set of thresholds and counts per kind of count;
    ``lowest[b]`` is ``[B]``, the lowest real "at least" threshold of each query of block ``b``.
    """
    tiles.load_rows(*blocks[i])
    for j in columns:
        tiles.load_columns(*blocks[j])
        negatives = tiles.product()
        found = _items_for_both(negatives, thresholds[i], thresholds[j], lowest[i], lowest[j])
        for s in range(thresholds[i].shape[0]):
            if found is None:
                counts[i][s] += count_at_least(negatives, thresholds[i][s])
                counts[j][s] += count_at_least(negatives, thresholds[j][s], transposed=True)
            else:
                where, values = found
                counts[i][s] += counts_from_items(where[:, 0], values, thresholds[i][s])
                counts[j][s] += counts_from_items(where[:, 1], values, thresholds[j][s])


def _items_for_both(
    negatives: Tensor, row_thresholds: Tensor, column_thresholds: Tensor, row_lowest: Tensor, column_lowest: Tensor
) -> tuple[Tensor, Tensor] | None:
    """The items of a tile at or above the lowest threshold of their row or of their column (``*_lowest``: of the
    "at least" thresholds, below the "strictly above" ones): one pass finds what both halves count (``None``:
    counting all costs less).
    """
    bound = torch.minimum(row_lowest[:, None], column_lowest)
    widths = [t.shape[2] for t in (row_thresholds, column_thresholds) for _ in range(t.shape[0])]
    return items_at_least(negatives, bound) if worth_finding(negatives, bound, widths) else None


class _Tiles:
    """Score tiles ``E_I E_J^T``, all computed by one product of the same shape from the same two buffers.

    BLAS libraries choose their kernel, and so the rounding of a dot product, by the shape and alignment of the
    operands: tiles of different shapes can give one pair two scores that differ in the last bit (seen with MKL), and
    a tie between items of different tiles would be missed. With one shape and fixed buffers a pair has one score.
    """

    def __init__(self, embeddings: Tensor, size: int) -> None:
        self.embeddings = embeddings
        self.rows = embeddings.new_zeros(size, embeddings.shape[1])
        self.columns = embeddings.new_zeros(size, embeddings.shape[1])
        self.scores = embeddings.new_empty(size, size)
        self.num_rows = self.num_columns = 0

    def load_rows(self, start: int, stop: int) -> None:
        self.num_rows = self._load(self.rows, start, stop)

    def load_columns(self, start: int, stop: int) -> None:
        self.num_columns = self._load(self.columns, start, stop)

    def _load(self, buffer: Tensor, start: int, stop: int) -> int:
        buffer[: stop - start] = self.embeddings[start:stop]
        buffer[stop - start :] = 0.0
        return stop - start

    def product(self) -> Tensor:
        """``[rows, columns]`` scores of the loaded blocks (a view of the product buffer)."""
        torch.matmul(self.rows, self.columns.T, out=self.scores)
        return self.scores[: self.num_rows, : self.num_columns]
