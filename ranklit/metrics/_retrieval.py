"""``RetrievalMetrics``: the exact retrieval metrics of [spec §1][spec-metrics] as a torchmetrics ``Metric``.

The metric only accumulates embeddings, labels, ids and roles (``dist_reduce_fx="cat"``, so DDP gathers them) and
calls :func:`ranklit.functional.metrics._retrieval.retrieval_metric_tensors` in :meth:`RetrievalMetrics.compute`; under
DDP the evaluation itself is split across the processes (:mod:`ranklit.functional.metrics._sharding`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities.data import dim_zero_cat

from ranklit._checks import check_chunk_size, check_flag
from ranklit._compat.torchmetrics import metric_is_synced, synced_states
from ranklit.functional.inputs import (
    check_distinct_ids,
    check_embeddings,
    check_ids,
    check_labels,
)
from ranklit.functional.metrics.engine import (
    check_average,
    check_cutoffs,
    check_recall_at,
    distributed_shard,
    nan_metrics,
    retrieval_metric_tensors,
)
from ranklit.functional.ties import check_ties
from ranklit.metrics._registry import register_metric

__all__ = ["RetrievalMetrics"]

_MIXED_IDS = "`ids` were given in some `update` calls and not in others: pass them in every call or in none."


@register_metric
class RetrievalMetrics(Metric):
    """mAP, mAP@R, P@1, Recall@k, R-precision, MRR, NDCG@k (and H-AP, ASI, NDCG, per-level metrics with ``[N, L]``
    labels) over everything seen; the keys and definitions of :func:`ranklit.functional.retrieval_metrics`.

    **Ties** follow ``ties`` ([spec §0][spec-ties]): ``"pessimistic"`` (default: the worst ordering of each group of
    equal scores, so ties never inflate a result), ``"average"`` (the expectation over its orderings) or
    ``"optimistic"``. ``average="class"`` averages the per-class means; :meth:`compute_per_query` gives every
    query's values.

    **Inputs.** Embeddings are L2-normalised at :meth:`compute` (cosine scores; ``normalize=False`` ranks by raw dot
    products). Labels must be integer tensors; the embedding size and the label shape (``[B]`` or ``[B, L]``) must
    stay the same across ``update`` calls, which refuse a change naming both shapes.

    **Roles.** ``update(embeddings, labels, ids)`` adds queries. If no item was ever added with ``gallery=True``, the
    evaluation is self-retrieval: every item is a query ranked against all the others, itself excluded by id (by
    position when no ids were given). If gallery items were added, the other items are the queries and they are ranked
    against the gallery only; then nothing is excluded, even where a query's id equals a gallery item's id (query and
    gallery are separate sets, e.g. In-Shop or DyML).

    **torchmetrics conventions.** :meth:`compute` returns a dict of 0-dim float64 tensors (the counts
    ``num_queries`` and ``num_queries_without_positive`` too, as exact whole numbers, so Lightning logs them without
    a cast warning). ``metric(embeddings, labels, ids)`` (forward) returns the metrics of that batch alone and keeps
    accumulating. A batch or an evaluation without any positive gives NaN means, counted in
    ``num_queries_without_positive``, with a ``UserWarning``: never an exception.

    **DDP.** States are gathered by concatenation, then :meth:`compute` splits the evaluation: each process ranks its
    share of the queries against the whole gathered retrieval set and the shares' sums and counts are all-reduced,
    so the time falls with the number of processes and every process returns the single-process result (counts
    exact, means up to the float64 summation order; on the flat self-retrieval path bit for bit). Every process must
    have called ``update`` at least once. ``DistributedSampler`` pads the last batch with repeated samples: pass the
    dataset indices as ``ids`` and :meth:`compute` keeps one item per id (within each role), so the result equals a
    single-process evaluation; an id repeated with a different label is a ``ValueError``. ``ids`` are optional:
    without them nothing can be deduplicated, the padded duplicates are counted as extra queries (and rank as
    positives of their originals), and items are excluded from their own ranking by position in the gathered set.

    **Logging in Lightning.** Lightning's ``self.log(name, metric)`` needs a metric whose ``compute`` returns one
    scalar, so log the dict instead, at the end of the epoch, then reset::

        def validation_step(self, batch, batch_idx):
            self.val_metrics.update(self(batch["image"]), batch["label"], batch["index"])

        def on_validation_epoch_end(self):
            self.log_dict(self.val_metrics.compute(), sync_dist=True)  # same values on every rank
            self.val_metrics.reset()

    ``sync_dist=True`` only silences Lightning's epoch-level warning: :meth:`compute` already returns the same values
    on every process. In a ``MetricCollection`` (``collection.compute()`` flattens the dicts), log
    ``self.log_dict(collection.compute(), sync_dist=True)`` and ``collection.reset()`` the same way.

    Memory: the metric stores ``N x D`` embeddings (use ``compute_on_cpu=True`` to keep them in host memory);
    :meth:`compute` peaks at ``O(chunk_size * N)``, see :func:`ranklit.functional.retrieval_metrics`.

    Args:
        recall_at: cut-offs of Recall@k.
        ndcg_at: cut-offs of NDCG@k.
        alpha: relevance exponent of H-AP (HAPPIER Eq. 4).
        ties: ``"pessimistic"``, ``"average"`` or ``"optimistic"``.
        average: ``"query"`` (mean over the queries) or ``"class"`` (mean of the per-class means).
        chunk_size: queries per chunk in :meth:`compute` (the tile side when the items rank each other with flat
            labels, see :func:`ranklit.functional.retrieval_metrics`); ``None`` = from the free memory.
        normalize: L2-normalise the embeddings (default ``True``); ``False`` ranks by raw dot products.
        compute_on_cpu: move the states to CPU after each update (torchmetrics option).
        **kwargs: other options of ``torchmetrics.Metric`` (``sync_on_compute``, ``process_group``, ...); torchmetrics
            rejects unknown names.

    Example:
        >>> import torch
        >>> metric = RetrievalMetrics(recall_at=(1, 2))
        >>> e = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
        >>> metric.update(e[:2], torch.tensor([0, 0]), ids=torch.tensor([0, 1]))
        >>> metric.update(e[2:], torch.tensor([1, 1]), ids=torch.tensor([2, 3]))
        >>> out = metric.compute()
        >>> out["map"], out["recall_at_1"], out["num_queries"]
        (tensor(1., dtype=torch.float64), tensor(1., dtype=torch.float64), tensor(4., dtype=torch.float64))
    """

    is_differentiable = False
    higher_is_better = True
    full_state_update = False

    embeddings: list[Tensor]
    labels: list[Tensor]
    ids: list[Tensor]
    gallery: list[Tensor]

    def __init__(
        self,
        recall_at: Sequence[int] = (1, 2, 4, 8),
        alpha: float = 1.0,
        chunk_size: int | None = None,
        normalize: bool = True,
        compute_on_cpu: bool = False,
        ndcg_at: Sequence[int] = (10,),
        ties: str = "pessimistic",
        average: str = "query",
        **kwargs: Any,
    ) -> None:
        super().__init__(compute_on_cpu=compute_on_cpu, **kwargs)
        self.recall_at = check_recall_at(recall_at)
        self.ndcg_at = check_cutoffs(ndcg_at, "ndcg_at")
        self.ties, self.average = check_ties(ties), check_average(average)
        if alpha < 0:
            raise ValueError(f"`alpha` must be >= 0, got {alpha}.")
        self.alpha = alpha
        self.chunk_size = check_chunk_size("chunk_size", chunk_size)
        self.normalize = check_flag("normalize", normalize)
        self.add_state("embeddings", default=[], dist_reduce_fx="cat")
        self.add_state("labels", default=[], dist_reduce_fx="cat")
        self.add_state("ids", default=[], dist_reduce_fx="cat")
        self.add_state("gallery", default=[], dist_reduce_fx="cat")

    def forward(self, embeddings: Tensor, labels: Tensor, ids: Tensor | None = None, *, gallery: bool = False) -> Any:
        """The metrics of this batch alone (NaN without positives); the batch is also added to the state.

        The batch is checked against what was accumulated *before* torchmetrics resets the state for the batch value,
        so a bad batch raises and leaves the accumulated state untouched.
        """
        self._check_batch(embeddings, labels, ids)
        return super().forward(embeddings, labels, ids, gallery=gallery)

    def update(self, embeddings: Tensor, labels: Tensor, ids: Tensor | None = None, *, gallery: bool = False) -> None:
        """Add a batch.

        Args:
            embeddings: ``[B, D]`` embeddings (any norm; normalised at :meth:`compute` unless ``normalize=False``).
            labels: ``[B]`` or ``[B, L]`` integer labels (column 0 = finest); the same shape in every call.
            ids: ``[B]`` unique sample ids (the dataset index); give them in every call or in none.
            gallery: the batch belongs to the gallery (the items the queries are ranked against).
        """
        labels, ids = self._check_batch(embeddings, labels, ids)
        self.embeddings.append(embeddings.detach())
        self.labels.append(labels.detach())
        if ids is not None:
            self.ids.append(ids.detach())
        self.gallery.append(torch.full((embeddings.shape[0],), gallery, dtype=torch.bool, device=embeddings.device))

    def _check_batch(self, embeddings: Tensor, labels: Tensor, ids: Tensor | None) -> tuple[Tensor, Tensor | None]:
        """Validate a batch, alone and against the accumulated state; the labels as int64 and the ids."""
        check_embeddings(embeddings, "embeddings", finite=False)  # finiteness is checked once, at compute
        if embeddings.shape[0] == 0:
            raise ValueError("`embeddings` is empty: `update` needs at least one item.")
        check_labels(labels, embeddings.shape[0], "labels")
        labels = labels.long()
        ids = check_ids(ids, embeddings.shape[0], "ids")
        seen = _first(self.embeddings)
        if seen is None:
            return labels, ids
        seen_labels, seen_ids = _first(self.labels), _num_rows(self.ids)
        if embeddings.shape[1] != seen.shape[1]:
            raise ValueError(
                f"`embeddings` have dimension {embeddings.shape[1]} but earlier `update` calls gave {seen.shape[1]}: "
                "every batch must come from the same model (call `reset()` between evaluations)."
            )
        if seen_labels is not None and labels.shape[1:] != seen_labels.shape[1:]:
            raise ValueError(
                f"`labels` have shape {tuple(labels.shape)} but earlier `update` calls gave "
                f"{('B', *tuple(seen_labels.shape[1:]))}: use [B] or [B, L] labels with the same L in every call."
            )
        if (seen_ids > 0) != (ids is not None):
            raise ValueError(_MIXED_IDS)
        return labels, ids

    def compute(self) -> dict[str, Tensor]:
        """The metrics of :func:`ranklit.functional.retrieval_metrics` over everything added (deduplicated by id),
        as 0-dim float64 tensors; under DDP each process evaluates its share of the queries."""
        return self._evaluate(per_query=False)[0]

    def compute_per_query(self) -> dict[str, Tensor]:
        """Every query's values: each metric key holds a ``[Q]`` float64 tensor (NaN for a query without a positive),
        plus ``"ids"`` (``[Q]``, the queries' ids in increasing order, or their positions among the queries when no
        ids were given), which says which query each entry belongs to. The two counts stay 0-dim. Same options and
        DDP split as :meth:`compute`."""
        with synced_states(self):
            values, ids = self._evaluate(per_query=True)
        values["ids"] = ids
        return values

    def _evaluate(self, per_query: bool) -> tuple[dict[str, Tensor], Tensor]:
        embeddings, labels, ids = _cat(self.embeddings), _cat(self.labels), _cat(self.ids)
        is_gallery = _cat(self.gallery)
        if embeddings is None or labels is None or is_gallery is None or embeddings.numel() == 0:
            raise ValueError("`RetrievalMetrics.compute` was called before any `update`: there is nothing to evaluate.")
        if ids is not None and ids.numel() == 0:
            ids = None  # after a DDP gather, "no ids anywhere" arrives as an empty tensor
        if ids is not None and ids.numel() != embeddings.shape[0]:
            raise ValueError(_MIXED_IDS)
        labels, is_gallery = labels.long(), is_gallery.bool()
        if ids is not None:
            ids = ids.long()
            check_distinct_ids(ids, "ids")
            keep, group = _first_occurrences(torch.stack([is_gallery.long(), ids], 1))
            _check_repeats(ids, labels, keep[group])
            embeddings, labels, ids, is_gallery = embeddings[keep], labels[keep], ids[keep], is_gallery[keep]
        query_ids = ids[~is_gallery] if ids is not None else torch.arange(int((~is_gallery).sum()),
                                                                            device=embeddings.device)
        num_levels = 1 if labels.ndim == 1 else labels.shape[1]
        if is_gallery.all():
            warnings.warn("Every item was added with `gallery=True`: there is no query, the metrics are NaN.",
                          UserWarning, stacklevel=3)
            return nan_metrics(0, num_levels, self.recall_at, embeddings.device, self.ndcg_at), query_ids
        options: dict[str, Any] = dict(
            recall_at=self.recall_at, ndcg_at=self.ndcg_at, alpha=self.alpha, ties=self.ties, average=self.average,
            per_query=per_query, chunk_size=self.chunk_size, normalize=self.normalize,
            shard=distributed_shard(self.process_group) if metric_is_synced(self) else None,
        )
        if not is_gallery.any():
            return retrieval_metric_tensors(embeddings, labels, ids=ids, **options), query_ids
        return retrieval_metric_tensors(
            embeddings[~is_gallery],
            labels[~is_gallery],
            ref_embeddings=embeddings[is_gallery],
            ref_labels=labels[is_gallery],
            **options,
        ), query_ids

    def plot(self, val: dict[str, Tensor] | None = None, ax: Any = None) -> tuple[Any, Any]:
        """Plot Recall@k against k (``val`` = the output of :meth:`compute`; computed if ``None``).

        Returns:
            ``(figure, axes)`` of matplotlib.
        """
        import matplotlib.pyplot as plt

        values = self.compute() if val is None else val
        ks = [k for k in self.recall_at if f"recall_at_{k}" in values]
        fig, ax = plt.subplots() if ax is None else (ax.get_figure(), ax)
        ax.plot(ks, [float(values[f"recall_at_{k}"]) for k in ks], marker="o")
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_xlabel("k")
        ax.set_ylabel("Recall@k")
        ax.set_ylim(0.0, 1.0)
        ax.grid(True, alpha=0.3)
        return fig, ax


def _first(state: list[Tensor] | Tensor) -> Tensor | None:
    """The first stored batch of a state (or the whole tensor after a sync); ``None`` when nothing was added."""
    if isinstance(state, Tensor):
        return state if state.numel() else None
    return state[0] if state else None


def _num_rows(state: list[Tensor] | Tensor) -> int:
    if isinstance(state, Tensor):
        return int(state.shape[0]) if state.numel() else 0
    return sum(int(t.shape[0]) for t in state)


def _cat(state: list[Tensor] | Tensor) -> Tensor | None:
    """A list state concatenated (after a DDP sync it is already one tensor); ``None`` when nothing was added."""
    if isinstance(state, Tensor):
        return state
    return dim_zero_cat(state) if state else None


def _check_repeats(ids: Tensor, labels: Tensor, first: Tensor) -> None:
    """Refuse an id added twice (in one role) with different labels: ``first[i]`` is the row kept for row ``i``."""
    differs = (labels != labels[first]).reshape(labels.shape[0], -1).any(1)
    if bool(differs.any()):
        row = int(differs.nonzero()[0])
        raise ValueError(
            f"`ids`: id {int(ids[row])} was added twice with different labels ({labels[first[row]].tolist()} and "
            f"{labels[row].tolist()}). An id names one sample (its dataset index); only a repeat of the same sample "
            "(DistributedSampler's padding) may come twice, and it is kept once: pass distinct ids for distinct "
            "samples."
        )


def _first_occurrences(keys: Tensor) -> tuple[Tensor, Tensor]:
    """Index of the first row of every distinct row of ``keys`` (``[N, K]``), in increasing key order, and the
    distinct row (group) of every row.

    Key order (role, then id) is the same however the items were split across processes and batches, so with ids
    the evaluation sees the items in one canonical order and its float sums do not depend on the number of processes.
    """
    _, inverse = torch.unique(keys, dim=0, return_inverse=True)
    positions = torch.arange(keys.shape[0], device=keys.device)
    first = torch.full((int(inverse.max()) + 1,), keys.shape[0], dtype=torch.long, device=keys.device)
    first.scatter_reduce_(0, inverse, positions, reduce="amin")
    return first, inverse
