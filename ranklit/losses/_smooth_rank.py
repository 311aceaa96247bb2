"""Smooth-rank AP losses as modules: :class:`SmoothAPLoss` (Brown et al. 2020) and :class:`SupAPLoss` (ROADMAP)."""

from __future__ import annotations

from dataclasses import asdict

from torch import Tensor

from ranklit._checks import check_chunk_size, check_positive
from ranklit.functional import SupAPOptions, smooth_ap_loss, supap_loss
from ranklit.functional.inputs import RetrievalInputs
from ranklit.functional.losses.hyperparameters import check_engine_runs
from ranklit.functional.reducers import Reducer
from ranklit.losses._registry import register_loss
from ranklit.losses.base import BinaryRetrievalLoss, binary_positives, checked_reducer

__all__ = ["SmoothAPLoss", "SupAPLoss"]


@register_loss(summary="1 − AP, sigmoid ranks", paper="Brown et al., ECCV 2020", ap=True)
class SmoothAPLoss(BinaryRetrievalLoss):
    """Smooth-AP (Brown et al., ECCV 2020): ``1 - mAP`` with every step replaced by ``sigma(x / tau)``::

        L = 1 - mean_q (1/R_q) sum_{k in P_q} (1 + sum_{j in P_q, j!=k} sig(s_j - s_k))
                                             / (1 + sum_{j in Omega_q, j!=k} sig(s_j - s_k))

    See :func:`ranklit.functional.smooth_ap_loss`. Positives share the finest label (column 0 of
    ``[B, L]`` labels); the query is excluded from its own ranking unless ``include_self=True``, which reproduces the
    authors' released Smooth-AP code (query kept as its own positive). Embeddings are L2-normalised first (cosine
    scores) unless ``normalize=False``. Time ``O(B P N)``, peak memory ``O(chunk P N + B N)`` (``P`` positives per
    query), never ``B^3``.

    Args:
        tau: sigmoid temperature (0.01).
        chunk_size: queries per chunk; ``None`` picks it from a memory budget.
        reducer: what the per-query terms ``1 - AP_q`` go to: ``"mean"`` (default: over the queries with a
            positive), ``"class_balanced"``, ``"active"``, ``"none"`` (the ``[B]`` terms, 0 for a query without
            positive) or a :class:`~ranklit.functional.Reducer` (:mod:`ranklit.functional.reducers`).
        normalize: L2-normalise the embeddings first (default ``True``; ``False``: raw dot products).
        include_self: keep the query in its own ranking, as a positive at rank 1 (default ``False``, the paper).
        engine: who computes the smooth-rank sums: ``"auto"`` (default: Triton kernels on CUDA when Triton imports,
            else torch), ``"torch"`` or ``"triton"`` (:func:`ranklit.functional.smooth_rank_engine`).

    Example:
        >>> import torch
        >>> _ = torch.manual_seed(0)
        >>> emb, labels = torch.randn(8, 4), torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
        >>> round(SmoothAPLoss()(emb, labels).item(), 4)
        0.7469
    """

    def __init__(
        self,
        tau: float = 0.01,
        chunk_size: int | None = None,
        reducer: str | Reducer = "mean",
        normalize: bool = True,
        include_self: bool = False,
        engine: str = "auto",
    ) -> None:
        super().__init__(normalize=normalize, include_self=include_self)
        self.tau = check_positive("tau", tau)
        self.chunk_size = check_chunk_size("chunk_size", chunk_size)
        self.reducer = checked_reducer(reducer)
        self.engine = check_engine_runs(engine)  # `triton` where it cannot run: refused now, not at the first step

    def retrieval_loss(self, scores: Tensor, inputs: RetrievalInputs, valid: Tensor) -> Tensor:
        return smooth_ap_loss(
            scores, binary_positives(inputs, valid), valid, tau=self.tau, chunk_size=self.chunk_size,
            reducer=self.reducer, query_classes=inputs.query_labels[:, 0], engine=self.engine,
        )


@register_loss(summary="smooth upper bound of 1 − AP", paper="ROADMAP, NeurIPS 2021", ap=True)
class SupAPLoss(BinaryRetrievalLoss):
    """SupAP (Ramzi et al., ROADMAP, NeurIPS 2021, Eq. 5): a smooth upper bound of ``1 - mAP``::

        L = 1 - mean_q (1/R_q) sum_{k in P_q} rank+(k) / (rank+(k) + sum_{j in N_q} H^-(s_j - s_k))

    The ranks among positives use the exact step (no gradient); the negatives use ``H^-`` (sigmoid, +0.5 jump on
    ``(0, delta]``, slope ``rho`` beyond). See :func:`ranklit.functional.supap_loss`. Positives share the finest
    label; the query is excluded from its own ranking unless ``include_self=True`` (the authors' ROADMAP code keeps
    it); embeddings are L2-normalised first unless ``normalize=False``. Time ``O(B P N)``, peak memory ``O(chunk P N + B
    N)``.

    Args:
        tau: sigmoid temperature of ``H^-`` (0.01).
        rho: slope of the linear part of ``H^-`` (100).
        delta: where the linear part starts (0.05).
        chunk_size: queries per chunk; ``None`` picks it from a memory budget.
        offset: ``H^-`` just after ``delta`` (``None``: continuous, the paper; the authors' configs: 1.44, and 1.0
            on iNaturalist).
        start: jump of ``H^-`` on ``(0, delta]`` (0.5; the authors' iNaturalist config: 0).
        engine: who computes the smooth-rank sums: ``"auto"`` (default: Triton kernels on CUDA when Triton imports,
            else torch), ``"torch"`` or ``"triton"`` (:func:`ranklit.functional.smooth_rank_engine`).
        reducer: what the per-query terms ``1 - AP_q`` go to: ``"mean"`` (default), ``"class_balanced"``,
            ``"active"``, ``"none"`` or a :class:`~ranklit.functional.Reducer` (:mod:`ranklit.functional.reducers`).
        normalize: L2-normalise the embeddings first (default ``True``; ``False``: raw dot products).
        include_self: keep the query in its own ranking, as a positive at rank 1 (default ``False``, the paper).

    The options of ``H^-`` are validated by :class:`ranklit.functional.SupAPOptions` (kept in ``self.options``).

    **Reproducing the authors' released code** ([spec §6][spec-released-code]): ``SupAPLoss(include_self=True,
    offset=1.44)``; on iNaturalist ``SupAPLoss(include_self=True, offset=1.0, start=0.0)``.

    Example:
        >>> import torch
        >>> _ = torch.manual_seed(0)
        >>> emb, labels = torch.randn(8, 4), torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
        >>> round(SupAPLoss()(emb, labels).item(), 4)
        0.9883
    """

    def __init__(
        self,
        *,
        tau: float = 0.01,
        rho: float = 100.0,
        delta: float = 0.05,
        chunk_size: int | None = None,
        offset: float | None = None,
        start: float = 0.5,
        engine: str = "auto",
        reducer: str | Reducer = "mean",
        normalize: bool = True,
        include_self: bool = False,
    ) -> None:
        super().__init__(normalize=normalize, include_self=include_self)
        self.options = SupAPOptions(
            tau=tau, rho=rho, delta=delta, chunk_size=chunk_size, offset=offset, start=start,
            engine=check_engine_runs(engine),
        )
        self.reducer = checked_reducer(reducer)

    def retrieval_loss(self, scores: Tensor, inputs: RetrievalInputs, valid: Tensor) -> Tensor:
        return supap_loss(
            scores, binary_positives(inputs, valid), valid, **asdict(self.options), reducer=self.reducer,
            query_classes=inputs.query_labels[:, 0],
        )
