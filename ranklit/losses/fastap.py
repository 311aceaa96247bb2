"""FastAP (Cakir et al., CVPR 2019) as a module."""

from __future__ import annotations

from torch import Tensor

from ranklit.functional.binned_ap import check_num_bins, fastap_loss
from ranklit.losses.base import BinaryRetrievalLoss

__all__ = ["FastAPLoss"]


class FastAPLoss(BinaryRetrievalLoss):
    """FastAP (Cakir et al., CVPR 2019, Eq. 14): ``1 - mean FastAP`` with soft histograms of ``z = 2 - 2s``.

    ``num_bins = K`` gives ``K + 1`` triangular bins of width ``4/K`` over ``[0, 4]``. Gradients come from autograd
    (the authors' backward is off by a factor ``N/2``; not reproduced). Positives share the finest label; the query
    is excluded from its own ranking unless ``include_self=True``; embeddings are L2-normalised first unless
    ``normalize=False``. See
    :func:`ranklit.functional.fastap_loss`. Time and memory ``O(B (N + K))``.

    Args:
        num_bins: ``K`` (10).
        normalize: L2-normalise the embeddings first (default ``True``; ``False``: raw dot products).
        include_self: keep the query in its own ranking (a positive at distance 0; default ``False``).

    Example:
        >>> import torch
        >>> _ = torch.manual_seed(0)
        >>> emb, labels = torch.randn(8, 4), torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
        >>> round(FastAPLoss()(emb, labels).item(), 4)
        0.7972
    """

    def __init__(self, num_bins: int = 10, normalize: bool = True, include_self: bool = False) -> None:
        super().__init__(normalize=normalize, include_self=include_self)
        self.num_bins = check_num_bins("num_bins", num_bins, 1)

    def binary_loss(self, scores: Tensor, positives: Tensor, valid: Tensor) -> Tensor:
        return fastap_loss(scores, positives, valid, num_bins=self.num_bins)
