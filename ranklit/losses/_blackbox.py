"""BlackBox AP (Rolínek et al., CVPR 2020) as a module."""

from __future__ import annotations

from torch import Tensor

from ranklit._checks import check_in_range, check_positive
from ranklit.functional import blackbox_ap_loss
from ranklit.functional.inputs import RetrievalInputs
from ranklit.functional.reducers import Reducer
from ranklit.losses._registry import register_loss
from ranklit.losses.base import BinaryRetrievalLoss, binary_positives, checked_reducer

__all__ = ["BlackBoxAPLoss"]


@register_loss(
    summary="1 − AP, blackbox differentiation of the ranking", paper="Rolínek et al., CVPR 2020", random=True, ap=True
)
class BlackBoxAPLoss(BinaryRetrievalLoss):
    """``1 - mAP`` from exact, sort-based ranks, differentiated as a blackbox (Rolínek et al., CVPR 2020).

    In training mode the scores get a random margin ``margin * |N(0, 1)| * (y - 1/2)`` (positives lowered, negatives
    raised) before ranking; in eval mode the loss is exactly ``1 - mAP``. See
    :func:`ranklit.functional.blackbox_ap_loss`. Positives share the finest label; the query is excluded from its own
    ranking unless ``include_self=True``; embeddings are L2-normalised first unless ``normalize=False``. Time
    ``O(B N log N)``, memory ``O(B N)``.

    Args:
        lam: blackbox interpolation strength ``lambda`` (4).
        margin: scale of the random training margin (0.02).
        reducer: what the per-query terms ``1 - AP_q`` go to: ``"mean"`` (default), ``"class_balanced"``,
            ``"active"``, ``"none"`` or a :class:`~ranklit.functional.Reducer` (:mod:`ranklit.functional.reducers`).
        normalize: L2-normalise the embeddings first (default ``True``; ``False``: raw dot products).
        include_self: keep the query in its own ranking, as a positive at rank 1 (default ``False``, the paper).

    Example:
        >>> import torch
        >>> _ = torch.manual_seed(0)
        >>> emb, labels = torch.randn(8, 4), torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
        >>> round(BlackBoxAPLoss()(emb, labels).item(), 4)
        0.7509
    """

    def __init__(
        self,
        lam: float = 4.0,
        margin: float = 0.02,
        reducer: str | Reducer = "mean",
        normalize: bool = True,
        include_self: bool = False,
    ) -> None:
        super().__init__(normalize=normalize, include_self=include_self)
        self.lam = check_positive("lam", lam)
        self.margin = check_in_range("margin", margin, 0.0, 2.0)
        self.reducer = checked_reducer(reducer)

    def retrieval_loss(self, scores: Tensor, inputs: RetrievalInputs, valid: Tensor) -> Tensor:
        return blackbox_ap_loss(
            scores, binary_positives(inputs, valid), valid, lam=self.lam, margin=self.margin if self.training else 0.0,
            reducer=self.reducer, query_classes=inputs.query_labels[:, 0],
        )
