"""ROADMAP's calibration loss as a module."""

from __future__ import annotations

from torch import Tensor

from ranklit.functional import calibration_loss
from ranklit.functional.inputs import RetrievalInputs
from ranklit.functional.losses.hyperparameters import check_margins, check_reduction
from ranklit.functional.reducers import Reducer
from ranklit.losses._registry import register_loss
from ranklit.losses.base import BinaryRetrievalLoss, binary_positives, checked_reducer

__all__ = ["CalibrationLoss"]


@register_loss(summary="fixed score thresholds (decomposability)", paper="ROADMAP, NeurIPS 2021")
class CalibrationLoss(BinaryRetrievalLoss):
    """Calibration loss (Ramzi et al., ROADMAP, NeurIPS 2021, Eq. 7): positives above ``alpha``, negatives below
    ``beta``, each term averaged per query, then over the queries with a positive.

    See :func:`ranklit.functional.calibration_loss`. ``reduction="batch_active"`` reproduces the authors' released
    ROADMAP code (pytorch-metric-learning's ``ContrastiveLoss`` with ``AvgNonZeroReducer``: the positive and the
    negative hinge terms each averaged over the active pairs of the whole batch, then added; a batch without any
    positive pair gives the negative term, where ``"query"`` raises). Embeddings are
    L2-normalised first unless ``normalize=False``. The query is never paired with itself. Time and memory ``O(B N)``.

    Args:
        alpha: positive threshold (0.9).
        beta: negative threshold (0.6), at most ``alpha``.
        reduction: ``"query"`` (the paper's formula, default) or ``"batch_active"`` (the authors' code).
        reducer: what the per-query terms of ``reduction="query"`` go to: ``"mean"`` (default),
            ``"class_balanced"``, ``"active"``, ``"none"`` or a :class:`~ranklit.functional.Reducer`
            (``"batch_active"`` takes ``"mean"`` only).
        normalize: L2-normalise the embeddings first (default ``True``; ``False``: raw dot products).

    Example:
        >>> import torch
        >>> _ = torch.manual_seed(0)
        >>> emb, labels = torch.randn(8, 4), torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
        >>> round(CalibrationLoss()(emb, labels).item(), 4)
        1.0019
    """

    def __init__(
        self,
        alpha: float = 0.9,
        beta: float = 0.6,
        reduction: str = "query",
        reducer: str | Reducer = "mean",
        normalize: bool = True,
    ) -> None:
        super().__init__(normalize=normalize)
        check_margins("alpha", alpha, "beta", beta)
        self.alpha, self.beta = float(alpha), float(beta)
        self.reduction, self.reducer = check_reduction(reduction, reducer), checked_reducer(reducer)

    def retrieval_loss(self, scores: Tensor, inputs: RetrievalInputs, valid: Tensor) -> Tensor:
        # "batch_active" is defined without any positive pair (the released code returns the negative term)
        positives = binary_positives(inputs, valid, require=self.reduction == "query")
        return calibration_loss(
            scores, positives, valid, alpha=self.alpha, beta=self.beta, reduction=self.reduction,
            reducer=self.reducer, query_classes=inputs.query_labels[:, 0],
        )
