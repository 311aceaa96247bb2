"""ROADMAP's calibration loss as a module."""

from __future__ import annotations

from torch import Tensor

from ranklit.functional.pair_losses import calibration_loss, check_margins
from ranklit.losses.base import BinaryRetrievalLoss

__all__ = ["CalibrationLoss"]


class CalibrationLoss(BinaryRetrievalLoss):
    """Calibration loss (Ramzi et al., ROADMAP, NeurIPS 2021, Eq. 7): positives above ``alpha``, negatives below
    ``beta``, each term averaged per query, then over the queries with a positive.

    See :func:`ranklit.functional.calibration_loss`. ``active_only=True`` reproduces the authors' code (averages over
    active hinges only). Embeddings are assumed L2-normalised. Time and memory ``O(B N)``.

    Args:
        alpha: positive threshold (0.9).
        beta: negative threshold (0.6), at most ``alpha``.
        active_only: average each term over its active hinges only (default ``False``, the paper's formula).

    Example:
        >>> import torch
        >>> emb = torch.nn.functional.normalize(torch.randn(8, 4), dim=1)
        >>> CalibrationLoss()(emb, torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])).item() >= 0.0
        True
    """

    def __init__(self, alpha: float = 0.9, beta: float = 0.6, active_only: bool = False) -> None:
        super().__init__()
        check_margins("alpha", alpha, "beta", beta)
        self.alpha, self.beta, self.active_only = float(alpha), float(beta), bool(active_only)

    def binary_loss(self, scores: Tensor, positives: Tensor, valid: Tensor) -> Tensor:
        return calibration_loss(
            scores, positives, valid, alpha=self.alpha, beta=self.beta, active_only=self.active_only
        )
