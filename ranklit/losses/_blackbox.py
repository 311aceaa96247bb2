"""BlackBox AP (Rolínek et al., CVPR 2020) as a module."""

from __future__ import annotations

from torch import Tensor

from ranklit.functional._blackbox import blackbox_ap_loss
from ranklit.functional.loss_utils import check_in_range, check_positive
from ranklit.losses.base import BinaryRetrievalLoss

__all__ = ["BlackBoxAPLoss"]


class BlackBoxAPLoss(BinaryRetrievalLoss):
    """``1 - mAP`` from exact, sort-based ranks, differentiated as a blackbox (Rolínek et al., CVPR 2020).

    In training mode the scores get a random margin ``margin * |N(0, 1)| * (y - 1/2)`` (positives lowered, negatives
    raised) before ranking; in eval mode the loss is exactly ``1 - mAP``. See
    :func:`ranklit.functional.blackbox_ap_loss`. Positives share the finest label; the query is excluded from its own
    ranking; embeddings are L2-normalised first unless ``normalize=False``. Time ``O(B N log N)``, memory ``O(B N)``.

    Args:
        lam: blackbox interpolation strength ``lambda`` (4).
        margin: scale of the random training margin (0.02).
        normalize: L2-normalise the embeddings first (default ``True``; ``False``: raw dot products).

    Example:
        >>> import torch
        >>> _ = torch.manual_seed(0)
        >>> emb, labels = torch.randn(8, 4), torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
        >>> round(BlackBoxAPLoss()(emb, labels).item(), 4)
        0.7509
    """

    def __init__(self, lam: float = 4.0, margin: float = 0.02, normalize: bool = True) -> None:
        super().__init__(normalize=normalize)
        self.lam = check_positive("lam", lam)
        self.margin = check_in_range("margin", margin, 0.0, 2.0)

    def binary_loss(self, scores: Tensor, positives: Tensor, valid: Tensor) -> Tensor:
        margin = self.margin if self.training else 0.0
        return blackbox_ap_loss(scores, positives, valid, lam=self.lam, margin=margin)
