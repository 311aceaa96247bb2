"""The binned AP losses as modules: FastAP (Cakir et al., CVPR 2019) and the listwise soft-binned AP loss (Revaud et
al., ICCV 2019), over :func:`ranklit.functional.fastap_loss` and :func:`ranklit.functional.softbin_ap_loss`."""

from __future__ import annotations

from torch import Tensor

from ranklit._checks import check_flag, check_int_at_least
from ranklit.functional import fastap_loss, softbin_ap_loss
from ranklit.functional.inputs import RetrievalInputs
from ranklit.functional.reducers import Reducer
from ranklit.losses._registry import register_loss
from ranklit.losses.base import BinaryRetrievalLoss, binary_positives, checked_reducer

__all__ = ["FastAPLoss", "SoftBinAPLoss"]


@register_loss(summary="1 − AP from distance histograms", paper="Cakir et al., CVPR 2019", ap=True)
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
        reducer: what the per-query terms ``1 - FastAP_q`` go to: ``"mean"`` (default), ``"class_balanced"``,
            ``"active"``, ``"none"`` or a :class:`~ranklit.functional.Reducer` (:mod:`ranklit.functional.reducers`).
        normalize: L2-normalise the embeddings first (default ``True``; ``False``: raw dot products).
        include_self: keep the query in its own ranking (a positive at distance 0; default ``False``).

    Example:
        >>> import torch
        >>> _ = torch.manual_seed(0)
        >>> emb, labels = torch.randn(8, 4), torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
        >>> round(FastAPLoss()(emb, labels).item(), 4)
        0.7972
    """

    def __init__(
        self,
        num_bins: int = 10,
        reducer: str | Reducer = "mean",
        normalize: bool = True,
        include_self: bool = False,
    ) -> None:
        super().__init__(normalize=normalize, include_self=include_self)
        self.num_bins = check_int_at_least("num_bins", num_bins, 1)
        self.reducer = checked_reducer(reducer)

    def retrieval_loss(self, scores: Tensor, inputs: RetrievalInputs, valid: Tensor) -> Tensor:
        return fastap_loss(
            scores, binary_positives(inputs, valid), valid, num_bins=self.num_bins, reducer=self.reducer,
            query_classes=inputs.query_labels[:, 0],
        )


@register_loss(
    summary="1 − mAP_Q / mAP_T, soft-binned",
    paper="Revaud et al., ICCV 2019",
    examples={"": {}, "options": {"tie_aware": True, "reducer": "class_balanced"}},
    ap=True,
)
class SoftBinAPLoss(BinaryRetrievalLoss):
    """Listwise AP loss ``1 - mAP_Q`` (Revaud et al., ICCV 2019, Eq. 7-12) with ``num_bins`` soft bins over
    ``[-1, 1]``.

    Positives share the finest label (column 0), as for every binary loss. ``tie_aware=True`` uses the tie-aware
    precision of Eq. 13 (``mAP_T``); ``reducer="class_balanced"`` weights the queries so that every (fine) class of
    the batch weighs the same (§4.2). The query is excluded from its own ranking unless
    ``include_self=True``; embeddings are L2-normalised first unless ``normalize=False``. See
    :func:`ranklit.functional.softbin_ap_loss` for the formula and the departure from the authors'
    end bins. Time and memory ``O(B (N + M))``.

    Args:
        num_bins: ``M`` (20), at least 2.
        tie_aware: use ``mAP_T``.
        reducer: what the per-query terms ``1 - AP_q`` go to: ``"mean"`` (default), ``"class_balanced"`` (the
            paper's class-balanced weights), ``"active"``, ``"none"`` or a :class:`~ranklit.functional.Reducer`.
        normalize: L2-normalise the embeddings first (default ``True``; ``False``: raw dot products).
        include_self: keep the query in its own ranking (a positive in the top bin; default ``False``).

    Example:
        >>> import torch
        >>> _ = torch.manual_seed(0)
        >>> emb, labels = torch.randn(8, 4), torch.tensor([0, 0, 1, 1, 1, 2, 2, 2])
        >>> round(SoftBinAPLoss(reducer="class_balanced")(emb, labels).item(), 4)
        0.6975
    """

    def __init__(
        self,
        num_bins: int = 20,
        tie_aware: bool = False,
        reducer: str | Reducer = "mean",
        normalize: bool = True,
        include_self: bool = False,
    ) -> None:
        super().__init__(normalize=normalize, include_self=include_self)
        self.num_bins = check_int_at_least("num_bins", num_bins, 2)
        self.tie_aware = check_flag("tie_aware", tie_aware)
        self.reducer = checked_reducer(reducer)

    def retrieval_loss(self, scores: Tensor, inputs: RetrievalInputs, valid: Tensor) -> Tensor:
        return softbin_ap_loss(
            scores,
            binary_positives(inputs, valid),
            valid,
            num_bins=self.num_bins,
            tie_aware=self.tie_aware,
            reducer=self.reducer,
            query_classes=inputs.query_labels[:, 0],
        )
