"""Composite losses: :class:`ROADMAPLoss` = SupAP + calibration (Ramzi et al., NeurIPS 2021, Eq. 2)."""

from __future__ import annotations

from torch import Tensor

from ranklit.functional.loss_utils import check_in_range
from ranklit.losses.base import BinaryRetrievalLoss
from ranklit.losses.calibration import CalibrationLoss
from ranklit.losses.smooth_ap import SupAPLoss

__all__ = ["ROADMAPLoss"]


class ROADMAPLoss(BinaryRetrievalLoss):
    """ROADMAP (Ramzi et al., NeurIPS 2021, Eq. 2): ``(1 - lam) L_SupAP + lam L_calibr``.

    Both terms share one score matrix. Defaults are the paper's: ``tau = 0.01``, ``rho = 100``, ``delta = 0.05``,
    ``alpha = 0.9``, ``beta = 0.6``, ``lam = 0.5``. The query is excluded from its own ranking and the authors'
    ``offset``/``start`` config values are not reproduced (see :class:`SupAPLoss`). Embeddings are assumed
    L2-normalised. Time ``O(B P N)``, peak memory ``O(chunk P N + B N)``.

    Args:
        tau, rho, delta: :class:`SupAPLoss` parameters.
        alpha, beta, active_only: :class:`CalibrationLoss` parameters.
        lam: weight of the calibration loss, in ``[0, 1]``.
        chunk_size: queries per chunk of the SupAP term (``None``: from a memory budget).

    Example:
        >>> import torch
        >>> emb = torch.nn.functional.normalize(torch.randn(8, 4), dim=1)
        >>> ROADMAPLoss()(emb, torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])).item() >= 0.0
        True
    """

    def __init__(
        self,
        tau: float = 0.01,
        rho: float = 100.0,
        delta: float = 0.05,
        alpha: float = 0.9,
        beta: float = 0.6,
        lam: float = 0.5,
        active_only: bool = False,
        chunk_size: int | None = None,
    ) -> None:
        super().__init__()
        self.lam = check_in_range("lam", lam, 0.0, 1.0)
        self.supap = SupAPLoss(tau=tau, rho=rho, delta=delta, chunk_size=chunk_size)
        self.calibration = CalibrationLoss(alpha=alpha, beta=beta, active_only=active_only)

    def binary_loss(self, scores: Tensor, positives: Tensor, valid: Tensor) -> Tensor:
        supap = self.supap.binary_loss(scores, positives, valid)
        return (1.0 - self.lam) * supap + self.lam * self.calibration.binary_loss(scores, positives, valid)
