"""Exact retrieval metrics over the full ranking, in memory-bounded pieces ([spec §1][spec-metrics]).

:func:`retrieval_metrics` takes one of three paths:

* flat labels, the items ranking each other (no gallery, no junk, distinct ids): every pair's score is computed once,
  in class-aligned tiles, and each positive's rank is a count of the items scoring at least as high
  (:func:`ranklit.functional.symmetric_ranks.symmetric_positive_ranks`) -> AP, mAP@R, P@1, Recall@k. Half the score
  matrix, no row ever sorted;
* flat labels otherwise: a chunk of queries is scored against the whole retrieval set with one matrix product, the
  excluded items (the query itself, junk) are removed, and the positives are ranked the same way without sorting the
  row (:func:`ranklit.functional.positive_ranks.positive_ranks`);
* hierarchical labels: the same chunks; the relevant items (same coarsest label) are ranked the same way, and their
  ranks and levels give H-AP, ASI, NDCG and the binary metrics of every label column
  (:mod:`ranklit.functional.hierarchical_metrics`).

Peak memory is ``O(chunk_size * N)`` (plus ``O(chunk_size * R * L)`` for ``R`` relevant items with hierarchical
labels; ``O(tile^2)`` on the first path), never ``O(N^2)``; everything runs on the embeddings' device.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence

import torch
from torch import Tensor

from ranklit.functional.hierarchical_metrics import (
    hierarchical_query_metrics,
    level_binary_metrics,
    rank_relevant_items,
)
from ranklit.functional.inputs import (
    check_chunk_size,
    check_distinct_ids,
    check_hierarchy,
    levels_between,
    prepare_inputs,
)
from ranklit.functional.positive_ranks import SortedKeys, binary_query_metrics, positive_ranks
from ranklit.functional.sharding import QueryShard
from ranklit.functional.symmetric_ranks import symmetric_positive_ranks, symmetric_tile_size

__all__ = ["retrieval_metrics", "retrieval_metric_tensors", "nan_metrics", "check_recall_at", "metrics_chunk_size"]

_CPU_CHUNK_BYTES = 256 * 2**20


def check_recall_at(recall_at: Sequence[int]) -> tuple[int, ...]:
    """Validate the cut-offs of Recall@k: a non-empty sequence of positive integers.

    >>> check_recall_at([4, 1, 4])
    (1, 4)
    """
    values = tuple(recall_at) if isinstance(recall_at, Sequence) and not isinstance(recall_at, str) else None
    if not values or not all(isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in values):
        raise ValueError(
            f"`recall_at` must be a non-empty sequence of positive integers, e.g. (1, 2, 4, 8), got {recall_at!r}."
        )
    return tuple(sorted(set(values)))


def metrics_chunk_size(
    num_queries: int, num_refs: int, num_levels: int, device: torch.device, max_relevant: int | None = None
) -> int:
    """Queries per chunk so one chunk's working tensors fit in a quarter of the free memory.

    A query costs about ``32 N`` bytes (its scores and comparison flags) plus, with hierarchical labels,
    ``96 + 16 L`` bytes per relevant item (levels, per-level counts, float64 terms), of which it has at most
    ``max_relevant`` (default ``N``). On CPU the chunk is also capped at 256 MiB (the comparison passes run over
    cache-sized tiles of it).

    >>> metrics_chunk_size(100, 1000, 1, torch.device("cpu"))
    100
    """
    relevant = num_refs if max_relevant is None else max_relevant
    bytes_per_query = 32 * num_refs + (0 if num_levels == 1 else (96 + 16 * num_levels) * relevant)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        budget = free // 4
    else:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 0
        budget = min(_CPU_CHUNK_BYTES, available // 4) if available > 0 else _CPU_CHUNK_BYTES
    return max(1, min(num_queries, budget // max(1, bytes_per_query)))


def _check_junk(junk: Tensor | None, num_queries: int, num_refs: int, device: torch.device) -> Tensor | None:
    if junk is None:
        return None
    if not isinstance(junk, Tensor) or junk.dtype != torch.bool or tuple(junk.shape) != (num_queries, num_refs):
        got = (junk.dtype, tuple(junk.shape)) if isinstance(junk, Tensor) else type(junk).__name__
        raise ValueError(
            f"`junk` must be a [Q, N] = [{num_queries}, {num_refs}] bool tensor marking the items removed from each "
            f"query's ranking, got {got}."
        )
    return junk.to(device)


def _unique(ids: Tensor | None) -> bool:
    return ids is not None and torch.unique(ids).numel() == ids.numel()


def _accumulate(totals: dict[str, Tensor], values: dict[str, Tensor], suffix: str = "") -> None:
    mask = values["has_positive"]
    for key, value in values.items():
        name = f"{key}{suffix}"
        total = value.to(torch.float64)[mask].sum() if key != "has_positive" else mask.sum().to(torch.float64)
        totals[name] = totals[name] + total if name in totals else total


def _binary_keys(recall_at: tuple[int, ...]) -> list[str]:
    return ["map", "map_at_r", "precision_at_1", *(f"recall_at_{k}" for k in recall_at)]


def _total_keys(num_levels: int, recall_at: tuple[int, ...]) -> list[str]:
    """The names of the per-query sums accumulated for ``num_levels`` label columns (``has_positive*`` = counts)."""
    binary = ["has_positive", *_binary_keys(recall_at)]
    if num_levels == 1:
        return binary
    hierarchical = [f"{key}_hier" for key in ("has_positive", "hap", "asi", "ndcg")]
    return hierarchical + [f"{key}_level{h}" for h in range(num_levels) for key in binary]


def retrieval_metrics(
    embeddings: Tensor,
    labels: Tensor,
    *,
    ref_embeddings: Tensor | None = None,
    ref_labels: Tensor | None = None,
    ids: Tensor | None = None,
    ref_ids: Tensor | None = None,
    recall_at: Sequence[int] = (1, 2, 4, 8),
    alpha: float = 1.0,
    chunk_size: int | None = None,
    junk: Tensor | None = None,
    normalize: bool = True,
) -> dict[str, float | int]:
    """Exact retrieval metrics of every query over its full ranking ([spec §1][spec-metrics]; ties pessimistic).

    Keys (python floats, means over the queries that have a positive):

    * ``map``, ``map_at_r``, ``precision_at_1``, ``recall_at_{k}`` for each ``k`` in ``recall_at``. With ``[N, L]``
      labels these use the finest level: positive = same label in column 0.
    * with ``[N, L]`` labels, ``L > 1``: ``hap`` (H-AP, relevance exponent ``alpha``), ``asi``, ``ndcg`` (positives:
      level >= 1), and ``map_level{h}``, ``map_at_r_level{h}``, ``precision_at_1_level{h}``, ``recall_at_{k}_level{h}``
      for every column ``h`` (positive = same label in column ``h``; ``level0`` equals the top-level keys).
    * ``num_queries`` (int): all queries; ``num_queries_without_positive`` (int): queries with no positive in column 0,
      left out of every mean (coarser columns have at least as many positives, so no metric leaves out more).

    When no query has a positive, the means are NaN (a ``UserWarning`` says so) and the counts say why: the metrics
    are undefined, which is not an error (e.g. one validation batch of a single class).

    Ties are pessimistic ([spec §0][spec-conventions]): every member of a group of equal scores takes the last rank of the group, so
    two positives tied at the top both have rank 2 and P@1 is 0 for that query. Scores are computed in float32 (float64
    if the embeddings are float64); ties are exact equalities of those scores.

    Args:
        embeddings: ``[Q, D]`` query embeddings; L2-normalised here (cosine scores) unless ``normalize=False``.
        labels: ``[Q]`` or ``[Q, L]`` integer labels, column 0 the finest.
        ref_embeddings: ``[N, D]`` gallery; ``None`` = the queries rank each other, each without itself.
        ref_labels: ``[N]`` or ``[N, L]`` gallery labels.
        ids: ``[Q]`` ids; an item whose id equals the query's is removed from its ranking (given with ``ref_ids``
            when there is a gallery; without a gallery it defaults to the positions).
        ref_ids: ``[N]`` gallery ids.
        recall_at: cut-offs of Recall@k.
        alpha: relevance exponent of H-AP (HAPPIER Eq. 4).
        chunk_size: queries per chunk; ``None`` picks one from the free memory (:func:`metrics_chunk_size`). On the
            symmetric path (flat labels, no gallery, no junk, distinct ids) it is the tile side instead (``None``:
            :func:`~ranklit.functional.symmetric_ranks.symmetric_tile_size`); a class larger than the tile sends the
            evaluation down the row-by-row path.
        junk: ``[Q, N]`` bool, items removed from each query's ranking (Revisited Oxford/Paris junk lists).
        normalize: L2-normalise the embeddings first (default ``True``); ``False`` ranks by raw dot products.

    Returns:
        The dictionary of metrics described above (:func:`retrieval_metric_tensors` gives the same as tensors).

    Raises:
        ValueError: mismatched lengths, non-finite embeddings, an inconsistent label hierarchy, or ids that are all
            equal.

    Cost: one ``[chunk, D] x [D, N]`` product per chunk (half of ``N^2 D`` on the symmetric path); binary metrics
    ``O(Q N R)`` vectorised comparisons for ``R <= 64`` positives (hierarchical: relevant items) per query,
    ``O(Q N log R)`` above; no row is sorted. Memory ``O(chunk_size * N)`` plus ``O(chunk_size * R * L)``.

    Example:
        >>> e = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
        >>> out = retrieval_metrics(e, torch.tensor([0, 0, 1, 1]), recall_at=(1,))
        >>> out["map"], out["recall_at_1"], out["num_queries"]
        (1.0, 1.0, 4)
    """
    values = retrieval_metric_tensors(
        embeddings, labels, ref_embeddings=ref_embeddings, ref_labels=ref_labels, ids=ids, ref_ids=ref_ids,
        recall_at=recall_at, alpha=alpha, chunk_size=chunk_size, junk=junk, normalize=normalize,
    )  # fmt: skip
    return {key: int(value) if key.startswith("num_") else float(value) for key, value in values.items()}


def retrieval_metric_tensors(
    embeddings: Tensor,
    labels: Tensor,
    *,
    ref_embeddings: Tensor | None = None,
    ref_labels: Tensor | None = None,
    ids: Tensor | None = None,
    ref_ids: Tensor | None = None,
    recall_at: Sequence[int] = (1, 2, 4, 8),
    alpha: float = 1.0,
    chunk_size: int | None = None,
    junk: Tensor | None = None,
    normalize: bool = True,
    shard: QueryShard | None = None,
) -> dict[str, Tensor]:
    """:func:`retrieval_metrics` as 0-dim float64 tensors on the embeddings' device (counts too, as exact floats).

    With ``shard`` (a :class:`~ranklit.functional.sharding.QueryShard`, used by ``RetrievalMetrics`` under DDP)
    every process holds the whole problem and evaluates its share of it; the shares' sums and counts are all-reduced,
    so every process returns the whole result while doing about ``1 / world_size`` of the work:

    * symmetric path: the off-diagonal score tiles are dealt to the processes in turn; the integer rank counts are
      all-reduced, then every process finishes the (cheap) metrics of every query. The counts, hence the result, are
      exactly those of one process (the diagonal tiles, about ``tile / N`` of the work, are computed by every process);
    * row-by-row paths: process ``r`` evaluates the queries ``r, r + W, ...`` of the order by class size (balanced
      shares) and the per-key float64 sums are all-reduced: counts exact, means equal to one process up to the
      float64 summation order (about ``1e-16`` relative).

    Example:
        >>> out = retrieval_metric_tensors(torch.eye(3), torch.tensor([0, 0, 1]), recall_at=(1,))
        >>> out["map"].item(), out["num_queries_without_positive"].item()
        (0.5, 1.0)
    """
    recall_at = check_recall_at(recall_at)
    check_chunk_size(chunk_size)
    x = prepare_inputs(
        embeddings, labels, ref_embeddings=ref_embeddings, ref_labels=ref_labels, ids=ids, ref_ids=ref_ids,
        normalize=normalize,
    )  # fmt: skip
    num_levels = x.num_levels
    num_queries, num_refs = x.queries.shape[0], x.refs.shape[0]
    if num_levels > 1:
        check_hierarchy(x.query_labels if ref_embeddings is None else torch.cat([x.query_labels, x.ref_labels]))
    if ref_embeddings is None and ids is not None and x.query_ids is not None:
        check_distinct_ids(x.query_ids, "ids")
    junk = _check_junk(junk, num_queries, num_refs, x.queries.device)
    # positives (flat) or relevant items (hierarchical): same label in the coarsest column
    label_keys = SortedKeys(x.ref_labels[:, -1])
    class_sizes = label_keys.count(x.query_labels[:, -1])
    largest_class = int(class_sizes.max())
    totals: dict[str, Tensor] = {}
    if ref_embeddings is None and num_levels == 1 and junk is None and _unique(x.query_ids):
        tile = chunk_size or symmetric_tile_size(num_queries, x.queries.device)
        if shard is not None:
            tile = shard.agree_min(tile)
        if largest_class <= tile:  # else a tile would have to hold a whole class: rank row by row
            for ranks in symmetric_positive_ranks(x.queries, x.query_labels[:, 0], tile, shard=shard):
                _accumulate(totals, binary_query_metrics(*ranks, recall_at))
            return _finalise(totals, num_queries, num_levels, recall_at, x.queries.device)
    chunk = chunk_size or metrics_chunk_size(
        num_queries, num_refs, num_levels, x.queries.device, max_relevant=largest_class
    )
    id_keys = SortedKeys(x.ref_ids) if x.query_ids is not None and x.ref_ids is not None else None
    # Queries with similar numbers of positives share a chunk, so the padded [chunk, P] positives waste little.
    order = torch.argsort(class_sizes, stable=True)
    if shard is not None:
        order = order[shard.rank :: shard.world_size]  # every process gets queries of every class size
    refs_t = x.refs.T.contiguous()
    for rows in order.split(chunk):
        scores = x.queries[rows] @ refs_t
        if id_keys is not None and x.query_ids is not None:
            index, valid = id_keys.match(x.query_ids[rows])
            chunk_rows = torch.arange(rows.numel(), device=scores.device)[:, None].expand_as(index)
            scores[chunk_rows[valid], index[valid]] = float("-inf")
        if junk is not None:
            scores.masked_fill_(junk[rows], float("-inf"))
        index, valid = label_keys.match(x.query_labels[rows, -1])
        if num_levels == 1:
            _accumulate(totals, binary_query_metrics(*positive_ranks(scores, index, valid), recall_at))
        else:  # the ranked relevant items serve H-AP, ASI, NDCG and the binary metrics of every column
            levels = levels_between(x.query_labels[rows], x.ref_labels[index])
            ranking = rank_relevant_items(scores, index, valid, levels, num_levels)
            _accumulate(totals, hierarchical_query_metrics(ranking, alpha), "_hier")
            for h in range(num_levels):
                _accumulate(totals, level_binary_metrics(ranking, h, recall_at), f"_level{h}")
    if shard is not None:
        keys = _total_keys(num_levels, recall_at)
        zero = torch.zeros((), dtype=torch.float64, device=x.queries.device)
        summed = shard.all_reduce_sum(torch.stack([totals.get(key, zero) for key in keys]))
        totals = dict(zip(keys, summed.unbind(), strict=True))
    return _finalise(totals, num_queries, num_levels, recall_at, x.queries.device)


def nan_metrics(
    num_queries: int, num_levels: int, recall_at: Sequence[int], device: torch.device | None = None
) -> dict[str, Tensor]:
    """The keys of :func:`retrieval_metric_tensors` with NaN means: ``num_queries`` queries, none with a positive.

    >>> out = nan_metrics(0, 1, (1,))
    >>> sorted(out), out["map"].isnan().item()
    (['map', 'map_at_r', 'num_queries', 'num_queries_without_positive', 'precision_at_1', 'recall_at_1'], True)
    """
    recall_at = check_recall_at(recall_at)
    zero = torch.zeros((), dtype=torch.float64, device=device)
    return _finalise({key: zero for key in _total_keys(num_levels, recall_at)}, num_queries, num_levels, recall_at,
                     device, warn=False)  # fmt: skip


def _finalise(
    totals: dict[str, Tensor],
    num_queries: int,
    num_levels: int,
    recall_at: tuple[int, ...],
    device: torch.device | None,
    warn: bool = True,
) -> dict[str, Tensor]:
    """Means of the per-query sums (0/0 = NaN: no query with a positive) and the two counts."""
    suffix = "" if num_levels == 1 else "_level0"
    zero = torch.zeros((), dtype=torch.float64, device=device)
    with_positive = totals.get(f"has_positive{suffix}", zero)
    if warn and int(with_positive) == 0:
        warnings.warn(
            "No query has a positive (an item of the retrieval set with the same finest label): the metrics are NaN. "
            "Check that queries and gallery share labels and that classes have at least two items.",
            UserWarning,
            stacklevel=3,
        )
    binary = _binary_keys(recall_at)
    out: dict[str, Tensor] = {}
    for key in binary:
        out[key] = totals.get(f"{key}{suffix}", zero) / with_positive
    if num_levels > 1:
        for key in ("hap", "asi", "ndcg"):
            out[key] = totals.get(f"{key}_hier", zero) / totals.get("has_positive_hier", zero)
        for h in range(num_levels):
            for key in binary:
                count = totals.get(f"has_positive_level{h}", zero)
                out[f"{key}_level{h}"] = totals.get(f"{key}_level{h}", zero) / count
    out["num_queries"] = torch.tensor(float(num_queries), dtype=torch.float64, device=device)
    out["num_queries_without_positive"] = out["num_queries"] - with_positive
    return out
