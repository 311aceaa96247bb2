"""The binned AP losses as modules: FastAP (Cakir et al., CVPR 2019) and the listwise soft-binned AP loss (Revaud et
al., ICCV 2019), over :mod:`ranklit.functional.binned_ap`."""

from __future__ import annotations

from torch import Tensor

from ranklit.functional.binned_ap import check_num_bins, fastap_loss, softbin_ap_loss
from ranklit.functional.inputs import RetrievalInputs
from ranklit.losses.base import BinaryRetrievalLoss, RetrievalLoss, binary_positives

__all__ = ["FastAPLoss", "SoftBinAPLoss"]


class FastAPLoss(BinaryRetrievalLoss):
    """FastAP (Cakir et al., CVPR 2019, Eq. 14): ``1 - mean FastAP`` with soft histograms of ``z = 2 - 2s``.

    ``num_bins = K`` gives ``K + 1`` triangular bins of width ``4/K`` over ``[0, 4]``. Gradients come from autograd
    (the authors' backward is off by a factor ``N/2``; not reproduced). Positives share the finest label; the query
    is excluded from its own ranking unless ``include_self=True``. The authors' released FastAP also leaves the query
    out, so the default reproduces it ([spec §6][spec-released-code]); ``include_self=True`` does not. Embeddings are
    L2-normalised first unless ``normalize=False``. See
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
        self.num_bins = check_int_at_least("num_bins", num_bins, 1)

    def binary_loss(self, scores: Tensor, positives: Tensor, valid: Tensor) -> Tensor:
        return fastap_loss(scores, positives, valid, num_bins=self.num_bins)


class SoftBinAPLoss(RetrievalLoss):
    """Listwise AP loss ``1 - mAP_Q`` (Revaud et al., ICCV 2019, Eq. 7-12) with ``num_bins`` soft bins over
    ``[-1, 1]``.

    Positives share the finest label (column 0), as for every binary loss. Options (off by default): ``tie_aware``
    uses the tie-aware precision of Eq. 13 (``mAP_T``); ``class_balanced`` weights the queries so that every (fine)
    class of the batch weighs the same (§4.2). The query is excluded from its own ranking unless
    ``include_self=True``; embeddings are L2-normalised first unless ``normalize=False``. See
    :func:`ranklit.functional.softbin_ap_loss` for the formula and the departure from the authors'
    end bins. Time and memory ``O(B (N + M))``.

    Args:
        num_bins: ``M`` (20), at least 2.
        tie_aware: use ``mAP_T``.
        class_balanced: class-balanced query weights.
        normalize: L2-normalise the embeddings first (default ``True``; ``False``: raw dot products).
        include_self: keep the query in its own ranking (a positive in the top bin; default ``False``).

    Example:
        >>> import torch
        >>> _ = torch.manual_seed(0)
        >>> emb, labels = torch.randn(8, 4), torch.tensor([0, 0, 1, 1, 1, 2, 2, 2])
        >>> round(SoftBinAPLoss(class_balanced=True)(emb, labels).item(), 4)
        0.6975
    """

    def __init__(
        self,
        num_bins: int = 20,
        tie_aware: bool = False,
        class_balanced: bool = False,
        normalize: bool = True,
        include_self: bool = False,
    ) -> None:
        super().__init__(normalize=normalize, include_self=include_self)
        self.num_bins = check_int_at_least("num_bins", num_bins, 2)
        self.tie_aware, self.class_balanced = bool(tie_aware), bool(class_balanced)

    def retrieval_loss(self, scores: Tensor, inputs: RetrievalInputs, valid: Tensor) -> Tensor:
        return softbin_ap_loss(
            scores,
            binary_positives(inputs, valid),
            valid,
            num_bins=self.num_bins,
            tie_aware=self.tie_aware,
            query_classes=inputs.query_labels[:, 0] if self.class_balanced else None,
        )
