"""The row-by-row paths of :func:`ranklit.functional.retrieval_metrics`: chunks of queries against every retrieval item.

A chunk of queries is scored against the whole retrieval set with one matrix product (into one buffer, allocated once
per call: on CPU, fresh pages cost about a microsecond each), the excluded items (the query itself, by id; junk) are
removed, and

* with flat labels the positives are ranked without sorting the row
  (:func:`ranklit.functional.metrics._positive_ranks.positive_counts`) -> every binary metric. On CPU the chunk's
  product and counting run by blocks of rows whose scores stay in the last-level cache
  (:func:`ranklit.functional.metrics._options.cached_rows`); the blocks' positives and counts are concatenated into the
  chunk's (:func:`~ranklit.functional.metrics._positive_ranks.concat_counts`) before any metric is computed, so the
  values are those of one product per chunk;
* with hierarchical labels the relevant items (same coarsest label) are ranked the same way, and their ranks and
  levels give H-AP, ASI, NDCG and the binary metrics of every label column
  (:mod:`ranklit.functional.metrics._hierarchical`).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from ranklit.functional.inputs import RetrievalInputs, levels_between
from ranklit.functional.metrics._hierarchical import (
    RelevantRanking,
    hierarchical_query_metrics,
    level_binary_metrics,
    rank_relevant_items,
    ranking_from_counts,
)
from ranklit.functional.metrics._kernel_counts import KernelCounter, KernelCounts
from ranklit.functional.metrics._options import cached_rows
from ranklit.functional.metrics._positive_ranks import SortedKeys, concat_counts, positive_counts
from ranklit.functional.metrics._query_values import QueryValues
from ranklit.functional.metrics.binary import binary_query_metrics
from ranklit.functional.ties import tie_positives

__all__ = ["evaluate_rows"]


def evaluate_rows(
    table: QueryValues,
    x: RetrievalInputs,
    order: Tensor,
    chunk: int,
    *,
    junk: Tensor | None,
    ties: str,
    cutoffs: Mapping[str, tuple[int, ...]],
    alpha: float,
    kernel: KernelCounter | None = None,
) -> None:
    """Store in ``table`` the values of the queries ``order`` (positions in ``x.queries``), ``chunk`` at a time.

    With ``kernel`` (CUDA: :func:`~ranklit.functional.metrics._kernel_counts.metrics_kernel`) each chunk's counts come
    from the Triton kernel, which never writes the chunk's scores; the metrics are computed from them alike.

    Cost: the ``Q x N`` score product, by chunks; memory ``O(chunk * N)`` (module docstring), ``O(chunk * R)`` with
    ``kernel``.
    """
    num_levels, num_refs = x.num_levels, x.refs.shape[0]
    strict = ties != "pessimistic"
    if kernel is not None:
        for rows in order.split(chunk):
            rows = kernel.by_label(rows)  # a program's queries then share their positives' tiles
            _store_kernel_counts(table, x, kernel.counts(rows, strict), rows, ties, cutoffs, alpha)
        return
    label_keys = SortedKeys(x.ref_labels[:, -1])
    id_keys = SortedKeys(x.ref_ids) if x.query_ids is not None and x.ref_ids is not None else None
    refs_t = x.refs.T.contiguous()
    block = chunk if num_levels > 1 else min(chunk, cached_rows(num_refs, x.queries.device))
    buffer = x.queries.new_empty(min(block, order.numel()), num_refs)

    def scores_of(rows: Tensor) -> Tensor:
        scores = torch.matmul(x.queries[rows], refs_t, out=buffer[: rows.numel()])
        if id_keys is not None and x.query_ids is not None:
            index, valid = id_keys.match(x.query_ids[rows])
            chunk_rows = torch.arange(rows.numel(), device=scores.device)[:, None].expand_as(index)
            scores[chunk_rows[valid], index[valid]] = float("-inf")
        if junk is not None:
            scores.masked_fill_(junk[rows], float("-inf"))
        return scores

    for rows in order.split(chunk):
        if num_levels == 1:
            parts = [positive_counts(scores_of(b), *label_keys.match(x.query_labels[b, 0]), strict=strict)
                     for b in rows.split(block)]
            descending, valid, at_least, above = concat_counts(parts)
            table.store(binary_query_metrics(tie_positives(descending, valid, at_least, above, ties), cutoffs), rows)
            continue
        scores = scores_of(rows)
        index, valid = label_keys.match(x.query_labels[rows, -1])
        levels = levels_between(x.query_labels[rows], x.ref_labels[index])
        _store_hierarchical(table, rank_relevant_items(scores, index, valid, levels, num_levels, ties), rows, cutoffs,
                            alpha)


def _store_hierarchical(
    table: QueryValues, ranking: RelevantRanking, rows: Tensor, cutoffs: Mapping[str, tuple[int, ...]], alpha: float
) -> None:
    table.store(hierarchical_query_metrics(ranking, alpha), rows, "_hier")
    for h in range(ranking.num_levels):
        table.store(level_binary_metrics(ranking, h, cutoffs), rows, f"_level{h}")


def _store_kernel_counts(
    table: QueryValues,
    x: RetrievalInputs,
    counts: KernelCounts,
    rows: Tensor,
    ties: str,
    cutoffs: Mapping[str, tuple[int, ...]],
    alpha: float,
) -> None:
    """The metrics of the queries ``rows`` from the kernel's counts (the same formulas as the torch path's)."""
    if x.num_levels == 1:
        tied = tie_positives(counts.descending, counts.valid, counts.at_least, counts.above, ties)
        table.store(binary_query_metrics(tied, cutoffs), rows)
        return
    levels = torch.where(counts.valid, levels_between(x.query_labels[rows], x.ref_labels[counts.columns]), 0)
    ranking = ranking_from_counts(counts.descending, counts.valid, levels, counts.at_least, counts.above,
                                  x.num_levels, ties)
    _store_hierarchical(table, ranking, rows, cutoffs, alpha)
