"""Composite losses: :class:`ROADMAPLoss` = SupAP + calibration (Ramzi et al., NeurIPS 2021, Eq. 2)."""

from __future__ import annotations

import math

from torch import Tensor

from ranklit._checks import check_in_range
from ranklit.functional.inputs import RetrievalInputs
from ranklit.functional.reducers import Reducer
from ranklit.losses._calibration import CalibrationLoss
from ranklit.losses._registry import register_loss
from ranklit.losses._smooth_rank import SupAPLoss
from ranklit.losses.base import BinaryRetrievalLoss, checked_reducer

__all__ = ["ROADMAPLoss"]


@register_loss(summary="SupAP + calibration", paper="ROADMAP, NeurIPS 2021")
class ROADMAPLoss(BinaryRetrievalLoss):
    """ROADMAP (Ramzi et al., NeurIPS 2021, Eq. 2): ``(1 - lam) L_SupAP + lam L_calibr``.

    Both terms share one score matrix. Defaults are the paper's: ``tau = 0.01``, ``rho = 100``, ``delta = 0.05``,
    ``alpha = 0.9``, ``beta = 0.6``, ``lam = 0.5``. The query is excluded from its own ranking. Embeddings are
    L2-normalised first unless ``normalize=False``. Time ``O(B P N)``, peak memory ``O(chunk P N + B N)``.

    **Reproducing the authors' released code** ([spec §6][spec-released-code]; ``elias-ramzi/ROADMAP``, configs
    ``roadmap.yaml`` / ``roadmap_inat.yaml``)::

        ROADMAPLoss(include_self=True, calibration_reduction="batch_active", weights=(1.0, 1.0), offset=1.44)
        ROADMAPLoss(include_self=True, calibration_reduction="batch_active", weights=(1.0, 1.0), offset=1.0,
                    start=0.0)                                                    # iNaturalist

    The SupAP term keeps each query in its own ranking and uses the configs' ``offset``/``start``; the calibration
    term averages its hinges over the active pairs of the whole batch (pytorch-metric-learning's ``ContrastiveLoss``,
    which never pairs an item with itself, so the calibration term excludes the query in both settings); the configs
    weight both terms 1.0, twice the paper's ``(1 - lam, lam) = (0.5, 0.5)``.

    Args:
        tau: sigmoid temperature of the SupAP term's ``H^-`` (0.01).
        rho: slope of the linear part of ``H^-`` (100).
        delta: where the linear part of ``H^-`` starts (0.05).
        chunk_size: queries per chunk of the SupAP term (``None``: from a memory budget).
        offset: ``H^-`` just after ``delta`` (``None``: continuous, the paper; the released configs: 1.44).
        start: jump of ``H^-`` on ``(0, delta]`` (0.5, the paper).
        engine: who computes the SupAP term's smooth-rank sums: ``"auto"`` (Triton kernels on CUDA when Triton
            imports, else torch), ``"torch"`` or ``"triton"`` (:func:`ranklit.functional.smooth_rank_engine`).
        alpha: :class:`CalibrationLoss` positive threshold (0.9).
        beta: :class:`CalibrationLoss` negative threshold (0.6).
        lam: weight of the calibration loss, in ``[0, 1]``.
        calibration_reduction: :class:`CalibrationLoss` ``reduction`` (``"query"``, the paper; ``"batch_active"``).
        weights: ``(w_SupAP, w_calibration)`` replacing ``(1 - lam, lam)`` (the released configs: ``(1.0, 1.0)``).
        reducer: the reducer of both terms (each term reduced, then weighted): ``"mean"`` (default),
            ``"class_balanced"``, ``"active"``, ``"none"`` (``[B]``) or a :class:`~ranklit.functional.Reducer`;
            with ``calibration_reduction="batch_active"`` only ``"mean"``.
        normalize: L2-normalise the embeddings first (default ``True``).
        include_self: keep the query in the SupAP term's ranking (authors' code; default ``False``).

    Example:
        >>> import torch
        >>> _ = torch.manual_seed(0)
        >>> emb, labels = torch.randn(8, 4), torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
        >>> round(ROADMAPLoss()(emb, labels).item(), 4)
        0.9951
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
        alpha: float = 0.9,
        beta: float = 0.6,
        lam: float = 0.5,
        calibration_reduction: str = "query",
        weights: tuple[float, float] | None = None,
        reducer: str | Reducer = "mean",
        normalize: bool = True,
        include_self: bool = False,
    ) -> None:
        super().__init__(normalize=normalize, include_self=include_self)
        self.lam = check_in_range("lam", lam, 0.0, 1.0)
        self.weights = (1.0 - self.lam, self.lam) if weights is None else _check_weights(weights)
        self.reducer = checked_reducer(reducer)
        self.supap = SupAPLoss(
            tau=tau, rho=rho, delta=delta, chunk_size=chunk_size, offset=offset, start=start, engine=engine,
            reducer=reducer,
        )
        self.calibration = CalibrationLoss(alpha=alpha, beta=beta, reduction=calibration_reduction, reducer=reducer)

    def retrieval_loss(self, scores: Tensor, inputs: RetrievalInputs, valid: Tensor) -> Tensor:
        supap = self.supap.retrieval_loss(scores, inputs, valid)
        self_pairs = inputs.self_pairs() if self.include_self else None
        pairs = valid if self_pairs is None else valid & ~self_pairs  # the calibration never pairs q with itself
        calibration = self.calibration.retrieval_loss(scores, inputs, pairs)
        return self.weights[0] * supap + self.weights[1] * calibration


def _check_weights(weights: tuple[float, float]) -> tuple[float, float]:
    if not isinstance(weights, (tuple, list)) or len(weights) != 2:
        raise ValueError(f"`weights` must be a pair (w_SupAP, w_calibration), e.g. (1.0, 1.0), got {weights!r}.")
    first, second = (check_in_range("weights", w, 0.0, math.inf) for w in weights)
    return first, second
