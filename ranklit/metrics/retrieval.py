"""``RetrievalMetrics``: the exact retrieval metrics of SPEC.md §1 as a torchmetrics ``Metric``.

The metric only accumulates embeddings, labels, ids and roles (``dist_reduce_fx="cat"``, so DDP gathers them) and
calls :func:`ranklit.functional.retrieval_metrics` in :meth:`RetrievalMetrics.compute`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities.data import dim_zero_cat

from ranklit.functional.metrics import check_recall_at, retrieval_metrics

__all__ = ["RetrievalMetrics"]

_MIXED_IDS = "`ids` were given in some `update` calls and not in others: pass them in every call or in none."


class RetrievalMetrics(Metric):
    """mAP, mAP@R, P@1, Recall@k (and H-AP, ASI, NDCG, per-level metrics with ``[N, L]`` labels) over everything seen.

    **Roles.** ``update(embeddings, labels, ids)`` adds queries. If no item was ever added with ``gallery=True``, the
    evaluation is self-retrieval: every item is a query ranked against all the others, itself excluded by id (by
    position when no ids were given). If gallery items were added, the other items are the queries and they are ranked
    against the gallery only; then nothing is excluded, even where a query's id equals a gallery item's id (query and
    gallery are separate sets, e.g. In-Shop or DyML).

    **DDP.** States are gathered by concatenation. ``DistributedSampler`` pads the last batch with repeated samples:
    pass the dataset indices as ``ids`` and :meth:`compute` keeps one item per id (within each role), so the result
    equals a single-process evaluation. Without ids no deduplication is possible.

    Memory: the metric stores ``N x D`` embeddings (use ``compute_on_cpu=True`` to keep them in host memory);
    :meth:`compute` peaks at ``O(chunk_size * N)``, see :func:`ranklit.functional.retrieval_metrics`.

    Args:
        recall_at: cut-offs of Recall@k.
        alpha: relevance exponent of H-AP (HAPPIER Eq. 4).
        chunk_size: queries per chunk in :meth:`compute` (the tile side when the items rank each other with flat
            labels, see :func:`ranklit.functional.retrieval_metrics`); ``None`` = from the free memory.
        compute_on_cpu: move the states to CPU after each update (torchmetrics option).
        **kwargs: other options of ``torchmetrics.Metric`` (``sync_on_compute``, ``process_group``, ...); torchmetrics
            rejects unknown names.

    Example:
        >>> metric = RetrievalMetrics(recall_at=(1, 2))
        >>> e = torch.nn.functional.normalize(torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]]), dim=1)
        >>> metric.update(e[:2], torch.tensor([0, 0]), ids=torch.tensor([0, 1]))
        >>> metric.update(e[2:], torch.tensor([1, 1]), ids=torch.tensor([2, 3]))
        >>> out = metric.compute()
        >>> out["map"], out["recall_at_1"], out["num_queries"]
        (1.0, 1.0, 4)
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
        compute_on_cpu: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(compute_on_cpu=compute_on_cpu, **kwargs)
        self.recall_at = check_recall_at(recall_at)
        if alpha < 0:
            raise ValueError(f"`alpha` must be >= 0, got {alpha}.")
        if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
            raise ValueError(f"`chunk_size` must be a positive integer or None (automatic), got {chunk_size!r}.")
        self.alpha = alpha
        self.chunk_size = chunk_size
        self.add_state("embeddings", default=[], dist_reduce_fx="cat")
        self.add_state("labels", default=[], dist_reduce_fx="cat")
        self.add_state("ids", default=[], dist_reduce_fx="cat")
        self.add_state("gallery", default=[], dist_reduce_fx="cat")
        self._with_ids: bool | None = None

    def update(self, embeddings: Tensor, labels: Tensor, ids: Tensor | None = None, *, gallery: bool = False) -> None:
        """Add a batch.

        Args:
            embeddings: ``[B, D]`` embeddings.
            labels: ``[B]`` or ``[B, L]`` integer labels (column 0 = finest).
            ids: ``[B]`` unique sample ids (the dataset index); give them in every call or in none.
            gallery: the batch belongs to the gallery (the items the queries are ranked against).
        """
        if not isinstance(embeddings, Tensor) or embeddings.ndim != 2:
            got = tuple(embeddings.shape) if isinstance(embeddings, Tensor) else type(embeddings).__name__
            raise ValueError(f"`embeddings` must be a [B, D] tensor, got {got}.")
        if not isinstance(labels, Tensor) or labels.shape[:1] != embeddings.shape[:1]:
            raise ValueError(
                f"`labels` must have one row per embedding ({embeddings.shape[0]}), got "
                f"{tuple(labels.shape) if isinstance(labels, Tensor) else type(labels).__name__}."
            )
        if ids is not None and (not isinstance(ids, Tensor) or tuple(ids.shape) != (embeddings.shape[0],)):
            got = tuple(ids.shape) if isinstance(ids, Tensor) else type(ids).__name__
            raise ValueError(f"`ids` must be a [B] = [{embeddings.shape[0]}] tensor of sample ids, got {got}.")
        if self._with_ids is not None and self._with_ids != (ids is not None):
            raise ValueError(_MIXED_IDS)
        self._with_ids = ids is not None
        self.embeddings.append(embeddings.detach())
        self.labels.append(labels.detach().long())
        if ids is not None:
            self.ids.append(ids.detach().long())
        self.gallery.append(torch.full((embeddings.shape[0],), gallery, dtype=torch.bool, device=embeddings.device))

    def reset(self) -> None:
        """Clear the states and forget whether ids were given."""
        super().reset()
        self._with_ids = None

    def compute(self) -> dict[str, float | int]:
        """The metrics of :func:`ranklit.functional.retrieval_metrics` over everything added (deduplicated by id)."""
        embeddings, labels, ids = _cat(self.embeddings), _cat(self.labels), _cat(self.ids)
        is_gallery = _cat(self.gallery)
        if embeddings is None or labels is None or is_gallery is None:
            raise ValueError("`RetrievalMetrics.compute` was called before any `update`: there is nothing to evaluate.")
        if ids is not None and ids.numel() != embeddings.shape[0]:
            raise ValueError(_MIXED_IDS)
        if ids is not None:
            keep = _first_occurrences(torch.stack([is_gallery.long(), ids], 1))
            embeddings, labels, ids, is_gallery = embeddings[keep], labels[keep], ids[keep], is_gallery[keep]
        options = dict(recall_at=self.recall_at, alpha=self.alpha, chunk_size=self.chunk_size)
        if not is_gallery.any():
            return retrieval_metrics(embeddings, labels, ids=ids, **options)
        if is_gallery.all():
            raise ValueError("Every item was added with `gallery=True`: add the queries with `gallery=False`.")
        return retrieval_metrics(
            embeddings[~is_gallery],
            labels[~is_gallery],
            ref_embeddings=embeddings[is_gallery],
            ref_labels=labels[is_gallery],
            **options,
        )

    def plot(self, val: dict[str, float | int] | None = None, ax: Any = None) -> tuple[Any, Any]:
        """Plot Recall@k against k (``val`` = the output of :meth:`compute`; computed if ``None``).

        Returns:
            ``(figure, axes)`` of matplotlib.
        """
        import matplotlib.pyplot as plt

        values = self.compute() if val is None else val
        ks = [k for k in self.recall_at if f"recall_at_{k}" in values]
        fig, ax = (plt.subplots() if ax is None else (ax.get_figure(), ax))
        ax.plot(ks, [values[f"recall_at_{k}"] for k in ks], marker="o")
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_xlabel("k")
        ax.set_ylabel("Recall@k")
        ax.set_ylim(0.0, 1.0)
        ax.grid(True, alpha=0.3)
        return fig, ax


def _cat(state: list[Tensor] | Tensor) -> Tensor | None:
    """A list state concatenated (after a DDP sync it is already one tensor); ``None`` when nothing was added."""
    if isinstance(state, Tensor):
        return state
    return dim_zero_cat(state) if state else None


def _first_occurrences(keys: Tensor) -> Tensor:
    """Sorted indices of the first row of every distinct row of ``keys`` (``[N, K]``)."""
    _, inverse = torch.unique(keys, dim=0, return_inverse=True)
    positions = torch.arange(keys.shape[0], device=keys.device)
    first = torch.full((int(inverse.max()) + 1,), keys.shape[0], dtype=torch.long, device=keys.device)
    first.scatter_reduce_(0, inverse, positions, reduce="amin")
    return first.sort().values
