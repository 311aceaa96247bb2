"""Exact retrieval metrics over the full ranking, in memory-bounded pieces ([spec §1][spec-metrics]).

:func:`retrieval_metrics` takes one of three paths:

* flat labels, the items ranking each other (no gallery, no junk, distinct ids): every pair's score is computed once,
  in class-aligned tiles, and each positive's rank is a count of the items scoring at least as high
  (:func:`ranklit.functional.metrics._symmetric_ranks.symmetric_positive_counts`) -> every binary metric
  (:mod:`ranklit.functional.metrics.binary`). Half the score matrix, no row ever sorted;
* flat labels otherwise: a chunk of queries is scored against the whole retrieval set with one matrix product, the
  excluded items (the query itself, junk) are removed, and the positives are ranked the same way without sorting the
  row (:func:`ranklit.functional.metrics._positive_ranks.positive_counts`);
* hierarchical labels: the same chunks; the relevant items (same coarsest label) are ranked the same way, and their
  ranks and levels give H-AP, ASI, NDCG and the binary metrics of every label column
  (:mod:`ranklit.functional.metrics._hierarchical`). These two: :mod:`ranklit.functional.metrics._row_metrics`.

On CUDA tensors (float32 scores, Triton importable) every case takes the row-by-row paths with the counts from a
Triton kernel that never writes the scores (:mod:`ranklit.functional.metrics._kernel_counts`): the same counts as the
torch path on the kernel's scores, the same metric formulas. The kernel checks itself on first use
(:mod:`ranklit.functional.metrics._kernel_check`); a launch that raises later gives one warning and the evaluation is
recomputed by the torch path (row by row, as the kernel's).

Peak memory is ``O(chunk_size * N)`` (plus ``O(chunk_size * R * L)`` for ``R`` relevant items with hierarchical
labels; ``O(tile^2)`` on the first path), never ``O(N^2)``; everything runs on the embeddings' device.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence

import torch
from torch import Tensor

from ranklit._checks import check_chunk_size
from ranklit.functional._kernels._guard import KernelLaunchError, kernel_failed
from ranklit.functional.floating_point import full_precision
from ranklit.functional.inputs import (
    RetrievalInputs,
    check_distinct_ids,
    check_hierarchy,
    prepare_inputs,
)
from ranklit.functional.metrics._kernel_check import METRICS_KERNEL, metric_kernel_usable
from ranklit.functional.metrics._kernel_counts import metrics_kernel
from ranklit.functional.metrics._options import (
    AVERAGES,
    check_average,
    check_cutoffs,
    check_junk,
    check_recall_at,
    metrics_chunk_size,
)
from ranklit.functional.metrics._positive_ranks import SortedKeys
from ranklit.functional.metrics._query_values import QueryValues
from ranklit.functional.metrics._row_metrics import evaluate_rows
from ranklit.functional.metrics._sharding import QueryShard
from ranklit.functional.metrics._symmetric_ranks import symmetric_positive_counts, symmetric_tile_size
from ranklit.functional.metrics._tie_share import warn_if_tied
from ranklit.functional.metrics.binary import binary_keys, binary_query_metrics
from ranklit.functional.ties import check_ties, tie_positives

__all__ = [
    "retrieval_metrics",
    "retrieval_metric_tensors",
    "nan_metrics",
    "check_cutoffs",
    "check_recall_at",
    "check_average",
    "metrics_chunk_size",
    "AVERAGES",
]


def _unique(ids: Tensor | None) -> bool:
    return ids is not None and torch.unique(ids).numel() == ids.numel()


def _total_keys(num_levels: int, cutoffs: dict[str, tuple[int, ...]]) -> list[str]:
    """The rows of the per-query table for ``num_levels`` label columns (``has_positive*`` = flags)."""
    binary = ["has_positive", *binary_keys(cutoffs)]
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
    ndcg_at: Sequence[int] = (10,),
    alpha: float = 1.0,
    ties: str = "pessimistic",
    average: str = "query",
    chunk_size: int | None = None,
    junk: Tensor | None = None,
    normalize: bool = True,
) -> dict[str, float | int]:
    """Exact retrieval metrics of every query over its full ranking ([spec §1][spec-metrics]).

    Keys (python floats, means over the queries that have a positive):

    * every binary metric of :data:`~ranklit.functional.metrics.binary.BINARY_METRICS` (``map``, ``map_at_r``,
      ``precision_at_1``, ``recall_at_{k}`` for each ``k`` in ``recall_at``, ...; a cut-off metric once per cut-off of
      its option; ``list_metrics(keys=True)``; the table of [spec §1][spec-metrics] is generated from it). With
      ``[N, L]`` labels these use the finest level: positive = same label in column 0.
    * with ``[N, L]`` labels, ``L > 1``: ``hap`` (H-AP, relevance exponent ``alpha``), ``asi``, ``ndcg`` (graded gains
      ``2^level - 1``, full list; positives: level >= 1), and every binary key with the suffix ``_level{h}`` for every
      column ``h`` (positive = same label in column ``h``; ``level0`` equals the top-level keys).
    * ``num_queries`` (int): all queries; ``num_queries_without_positive`` (int): queries with no positive in column 0,
      left out of every mean (coarser columns have at least as many positives, so no metric leaves out more).

    When no query has a positive, the means are NaN (a ``UserWarning`` says so) and the counts say why: the metrics
    are undefined, which is not an error (e.g. one validation batch of a single class).

    **Ties** ([spec §0][spec-ties]): ``"pessimistic"`` (default) = the value under the worst ordering of each group of
    equal scores (its negatives first: two positives tied at the top give P@1 = 1; never above any ordering, so ties
    cannot inflate a result), ``"average"`` = the expectation over uniformly random orderings (closed form; as
    scikit-learn's ``ndcg_score``), ``"optimistic"`` = the best ordering. Scores are computed in float32 (float64 if
    the embeddings are float64) and ties are exact equalities of those scores: which scores tie depends on the dtype.
    On CUDA the counts come from a Triton kernel whose float32 scores may differ from the CPU's in their last bits:
    its counts equal the torch path's on its own scores, and the CPU's unless two scores lie within round-off
    ([spec §0][spec-ties]; ``RANKLIT_METRICS_KERNEL=0`` keeps the torch path).

    Args:
        embeddings: ``[Q, D]`` query embeddings; L2-normalised here (cosine scores) unless ``normalize=False``.
        labels: ``[Q]`` or ``[Q, L]`` integer labels, column 0 the finest.
        ref_embeddings: ``[N, D]`` gallery; ``None`` = the queries rank each other, each without itself.
        ref_labels: ``[N]`` or ``[N, L]`` gallery labels.
        ids: ``[Q]`` ids; an item whose id equals the query's is removed from its ranking (given with ``ref_ids``
            when there is a gallery; without a gallery it defaults to the positions).
        ref_ids: ``[N]`` gallery ids.
        recall_at: cut-offs of Recall@k.
        ndcg_at: cut-offs of NDCG@k.
        alpha: relevance exponent of H-AP (HAPPIER Eq. 4).
        ties: ``"pessimistic"``, ``"average"`` or ``"optimistic"`` (the last two count, for each positive, the items
            scoring strictly higher too: about twice the counting work).
        average: ``"query"`` (default): mean over the queries; ``"class"``: mean over the classes (finest label) of
            the per-class means (pytorch-metric-learning's ``avg_of_avgs``). Per-query values:
            :func:`retrieval_metric_tensors` with ``per_query=True``.
        chunk_size: queries per chunk; ``None`` picks one from the free memory (:func:`metrics_chunk_size`). On the
            symmetric path (flat labels, no gallery, no junk, distinct ids; not on CUDA, where the kernel counts) it
            is the tile side instead (``None``:
            :func:`~ranklit.functional.metrics._symmetric_ranks.symmetric_tile_size`); a class larger than the tile
            sends the evaluation down the row-by-row path.
        junk: ``[Q, N]`` bool, items removed from each query's ranking (Revisited Oxford/Paris junk lists).
        normalize: L2-normalise the embeddings first (default ``True``); ``False`` ranks by raw dot products.

    Returns:
        The dictionary of metrics described above (:func:`retrieval_metric_tensors` gives the same as tensors).

    Raises:
        ValueError: mismatched lengths, non-finite embeddings, an inconsistent label hierarchy, ids that are all
            equal, or an unknown option value.

    Cost: one ``[chunk, D] x [D, N]`` product per chunk (half of ``N^2 D`` on the symmetric path); binary metrics
    ``O(Q N R)`` vectorised comparisons for ``R <= 64`` positives (hierarchical: relevant items) per query,
    ``O(Q N)`` above (a histogram of score bins on CPU, ``O(Q N log R)`` on GPU); no row is sorted. Memory
    ``O(chunk_size * N)`` plus ``O(chunk_size * R * L)`` and the ``[K, Q]`` float64 table of per-query values
    (:class:`~ranklit.functional.metrics._query_values.QueryValues`).

    Example:
        >>> e = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
        >>> out = retrieval_metrics(e, torch.tensor([0, 0, 1, 1]), recall_at=(1,))
        >>> out["map"], out["recall_at_1"], out["mrr"], out["num_queries"]
        (1.0, 1.0, 1.0, 4)
    """
    values = retrieval_metric_tensors(
        embeddings, labels, ref_embeddings=ref_embeddings, ref_labels=ref_labels, ids=ids, ref_ids=ref_ids,
        recall_at=recall_at, ndcg_at=ndcg_at, alpha=alpha, ties=ties, average=average, chunk_size=chunk_size,
        junk=junk, normalize=normalize,
    )
    return {key: int(value) if key.startswith("num_") else float(value) for key, value in values.items()}


@full_precision  # the scores and their ties in float32 (float64 stays), autocast or not
def retrieval_metric_tensors(
    embeddings: Tensor,
    labels: Tensor,
    *,
    ref_embeddings: Tensor | None = None,
    ref_labels: Tensor | None = None,
    ids: Tensor | None = None,
    ref_ids: Tensor | None = None,
    recall_at: Sequence[int] = (1, 2, 4, 8),
    ndcg_at: Sequence[int] = (10,),
    alpha: float = 1.0,
    ties: str = "pessimistic",
    average: str = "query",
    per_query: bool = False,
    chunk_size: int | None = None,
    junk: Tensor | None = None,
    normalize: bool = True,
    shard: QueryShard | None = None,
) -> dict[str, Tensor]:
    """:func:`retrieval_metrics` as 0-dim float64 tensors on the embeddings' device (counts too, as exact floats).

    With ``per_query=True`` every metric key holds instead the ``[Q]`` values of the queries, in their input order
    (NaN for a query without a positive in that key's column); the two counts stay 0-dim.

    With ``shard`` (a :class:`~ranklit.functional.metrics._sharding.QueryShard`, used by ``RetrievalMetrics`` under DDP)
    every process holds the whole problem and evaluates its share of it, without duplicated work: on the symmetric
    path each process computes a disjoint share of the score tiles (diagonal ones included) and the integer counts
    are all-reduced; on the row-by-row paths process ``r`` evaluates the queries ``r, r + W, ...`` of the order by
    class size. Every query's values are computed by one process and gathered exactly, so every process returns the
    same result: the single-process one bit for bit on the symmetric path; on the row-by-row paths up to the rounding
    of the score products (a BLAS library may round a row's dot products differently in a chunk of other rows).

    Example:
        >>> out = retrieval_metric_tensors(torch.eye(3), torch.tensor([0, 0, 1]), recall_at=(1,))
        >>> out["map"].item(), out["num_queries_without_positive"].item()
        (0.5, 1.0)
    """
    cutoffs = {"recall_at": check_recall_at(recall_at), "ndcg_at": check_cutoffs(ndcg_at, "ndcg_at")}
    ties, average = check_ties(ties), check_average(average)
    check_chunk_size("chunk_size", chunk_size)
    x = prepare_inputs(
        embeddings, labels, ref_embeddings=ref_embeddings, ref_labels=ref_labels, ids=ids, ref_ids=ref_ids,
        normalize=normalize,
    )
    num_levels = x.num_levels
    num_queries, num_refs = x.queries.shape[0], x.refs.shape[0]
    if num_levels > 1:
        check_hierarchy(x.query_labels if ref_embeddings is None else torch.cat([x.query_labels, x.ref_labels]))
    if ref_embeddings is None and ids is not None and x.query_ids is not None:
        check_distinct_ids(x.query_ids, "ids")
    junk = check_junk(junk, num_queries, num_refs, x.queries.device)
    evaluate = functools.partial(_evaluate, cutoffs=cutoffs, alpha=alpha, average=average, chunk_size=chunk_size)
    if shard is None or shard.rank == 0:  # the sampled queries against the whole set: a copy of the full problem
        warn_if_tied(x, junk, ties, lambda inputs, removed, policy: evaluate(
            inputs, removed, symmetric=False, ties=policy, per_query=False, shard=None))
    symmetric = ref_embeddings is None and num_levels == 1 and junk is None and _unique(x.query_ids)
    return evaluate(x, junk, symmetric=symmetric, ties=ties, per_query=per_query, shard=shard)


def _evaluate(
    x: RetrievalInputs,
    junk: Tensor | None,
    *,
    symmetric: bool,
    cutoffs: dict[str, tuple[int, ...]],
    ties: str,
    alpha: float,
    average: str,
    per_query: bool,
    chunk_size: int | None,
    shard: QueryShard | None,
) -> dict[str, Tensor]:
    """The metrics of validated inputs (``symmetric``: the queries rank each other, flat labels, no junk, distinct
    ids, so the symmetric path may be taken)."""
    num_levels = x.num_levels
    num_queries, num_refs = x.queries.shape[0], x.refs.shape[0]
    # positives (flat) or relevant items (hierarchical): same label in the coarsest column
    label_keys = SortedKeys(x.ref_labels[:, -1])
    class_sizes = label_keys.count(x.query_labels[:, -1])
    largest_class = int(class_sizes.max())
    table = QueryValues(_total_keys(num_levels, cutoffs), num_queries, x.queries.device)
    strict = ties != "pessimistic"
    finish = (x.query_labels[:, 0], num_queries, num_levels, cutoffs, average, per_query)
    kernel = metrics_kernel(x, junk)  # CUDA: the Triton kernel counts, the scores never written (else None)
    if kernel is not None and not metric_kernel_usable(x.queries.device):  # its self-check, on first use
        kernel = None
    if kernel is None and symmetric:
        tile = chunk_size or symmetric_tile_size(num_queries, x.queries.device)
        if shard is not None:
            tile = shard.agree_min(tile)
        if largest_class <= tile:  # else a tile would have to hold a whole class: rank row by row
            blocks = symmetric_positive_counts(x.queries, x.query_labels[:, 0], tile, strict=strict, shard=shard)
            for rows, descending, valid, at_least, above in blocks:
                tied = tie_positives(descending, valid, at_least, above, ties)
                table.store(binary_query_metrics(tied, cutoffs), rows)
            if shard is not None:
                table.all_reduce(shard)
            return _finalise(table, *finish)
    chunk = chunk_size or metrics_chunk_size(
        num_queries, num_refs, num_levels, x.queries.device, max_relevant=largest_class,
        kernel_bytes=None if kernel is None else kernel.bytes_per_query(largest_class),
    )
    # Queries with similar numbers of positives share a chunk, so the padded [chunk, P] positives waste little.
    order = torch.argsort(class_sizes, stable=True)
    if shard is not None:
        order = order[shard.rank :: shard.world_size]  # every process gets queries of every class size
    try:
        evaluate_rows(table, x, order, chunk, junk=junk, ties=ties, cutoffs=cutoffs, alpha=alpha, kernel=kernel)
    except KernelLaunchError as error:  # one warning; the torch path for this evaluation and the process's next ones
        kernel_failed(METRICS_KERNEL, x.queries.device, torch.float32, error)
        table = QueryValues(_total_keys(num_levels, cutoffs), num_queries, x.queries.device)
        chunk = chunk_size or metrics_chunk_size(num_queries, num_refs, num_levels, x.queries.device,
                                                 max_relevant=largest_class)
        evaluate_rows(table, x, order, chunk, junk=junk, ties=ties, cutoffs=cutoffs, alpha=alpha)
    if shard is not None:
        table.all_reduce(shard)
    return _finalise(table, *finish)


def nan_metrics(
    num_queries: int,
    num_levels: int,
    recall_at: Sequence[int],
    device: torch.device | None = None,
    ndcg_at: Sequence[int] = (10,),
) -> dict[str, Tensor]:
    """The keys of :func:`retrieval_metric_tensors` with NaN means: ``num_queries`` queries, none with a positive.

    >>> out = nan_metrics(0, 1, (1,))
    >>> sorted(out)[:4], out["map"].isnan().item()
    (['map', 'map_at_r', 'mrr', 'ndcg_at_10'], True)
    """
    cutoffs = {"recall_at": check_recall_at(recall_at), "ndcg_at": check_cutoffs(ndcg_at, "ndcg_at")}
    table = QueryValues(_total_keys(num_levels, cutoffs), 0, device)
    return _finalise(table, torch.zeros(0, dtype=torch.long, device=device), num_queries, num_levels, cutoffs,
                     "query", False, warn=False)


def _finalise(
    table: QueryValues,
    classes: Tensor,
    num_queries: int,
    num_levels: int,
    cutoffs: dict[str, tuple[int, ...]],
    average: str,
    per_query: bool,
    warn: bool = True,
) -> dict[str, Tensor]:
    """Means (or per-query values) of every key, and the two counts."""
    suffix = "" if num_levels == 1 else "_level0"
    with_positive = table.count(f"has_positive{suffix}")
    if warn and int(with_positive) == 0:
        warnings.warn(
            "No query has a positive (an item of the retrieval set with the same finest label): the metrics are NaN. "
            "Check that queries and gallery share labels and that classes have at least two items.",
            UserWarning,
            stacklevel=3,
        )

    def value(key: str, flag: str) -> Tensor:
        if per_query:
            return table.per_query(key, flag)
        return table.mean(key, flag, classes if average == "class" else None)

    out: dict[str, Tensor] = {}
    binary = binary_keys(cutoffs)
    for key in binary:
        out[key] = value(f"{key}{suffix}", f"has_positive{suffix}")
    if num_levels > 1:
        for key in ("hap", "asi", "ndcg"):
            out[key] = value(f"{key}_hier", "has_positive_hier")
        for h in range(num_levels):
            for key in binary:
                out[f"{key}_level{h}"] = value(f"{key}_level{h}", f"has_positive_level{h}")
    out["num_queries"] = torch.tensor(float(num_queries), dtype=torch.float64, device=table.table.device)
    out["num_queries_without_positive"] = out["num_queries"] - with_positive
    return out
