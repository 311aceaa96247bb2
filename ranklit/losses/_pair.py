"""Pair and triplet baselines as modules: :class:`ContrastiveLoss` and :class:`TripletLoss`."""

from __future__ import annotations

from torch import Tensor

from ranklit._checks import check_chunk_size, check_positive
from ranklit.functional import contrastive_loss, triplet_loss
from ranklit.functional.inputs import RetrievalInputs
from ranklit.functional.losses.hyperparameters import check_margins, check_mining
from ranklit.functional.reducers import Reducer
from ranklit.losses._registry import register_loss
from ranklit.losses.base import BinaryRetrievalLoss, RetrievalLoss, binary_positives, checked_reducer

__all__ = ["ContrastiveLoss", "TripletLoss"]


@register_loss(summary="pair loss", paper="baseline")
class ContrastiveLoss(BinaryRetrievalLoss):
    """Contrastive (pair) loss on cosine similarities: positives pulled to ``pos_margin``, negatives pushed below
    ``neg_margin``; per-query sums averaged over the queries with a positive (see
    :func:`ranklit.functional.contrastive_loss`). Embeddings are L2-normalised first unless ``normalize=False``. Time
    and memory ``O(B N)``.

    Args:
        pos_margin: target similarity of positives (1.0).
        neg_margin: negatives are penalised above it (0.5).
        reducer: what the per-query sums go to: ``"mean"`` (default), ``"class_balanced"``, ``"active"``,
            ``"none"`` or a :class:`~ranklit.functional.Reducer` (:mod:`ranklit.functional.reducers`).
        normalize: L2-normalise the embeddings first (default ``True``; ``False``: raw dot products).

    Example:
        >>> import torch
        >>> _ = torch.manual_seed(0)
        >>> emb, labels = torch.randn(8, 4), torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
        >>> round(ContrastiveLoss()(emb, labels).item(), 4)
        1.4493
    """

    def __init__(
        self,
        pos_margin: float = 1.0,
        neg_margin: float = 0.5,
        reducer: str | Reducer = "mean",
        normalize: bool = True,
    ) -> None:
        super().__init__(normalize=normalize)
        check_margins("pos_margin", pos_margin, "neg_margin", neg_margin)
        self.pos_margin, self.neg_margin = float(pos_margin), float(neg_margin)
        self.reducer = checked_reducer(reducer)

    def retrieval_loss(self, scores: Tensor, inputs: RetrievalInputs, valid: Tensor) -> Tensor:
        return contrastive_loss(
            scores, binary_positives(inputs, valid), valid, pos_margin=self.pos_margin, neg_margin=self.neg_margin,
            reducer=self.reducer, query_classes=inputs.query_labels[:, 0],
        )


@register_loss(
    summary="triplet, semi-hard or distance-weighted",
    paper="baseline",
    examples={"": {}, "distance_weighted": {"mining": "distance_weighted"}},
    random=("distance_weighted",),
)
class TripletLoss(RetrievalLoss):
    """Triplet loss ``[d_ap - d_an + margin]_+`` (Euclidean distances of unit vectors), one mined negative per
    (anchor, positive) pair: semi-hard mining by default (TL_SH of the papers' tables), or distance-weighted sampling
    (Wu et al. 2017). See :func:`ranklit.functional.triplet_loss`. Positives share the finest label; embeddings are
    L2-normalised first unless ``normalize=False`` (the distances ``sqrt(2 - 2s)`` assume unit vectors). Semi-hard: time
    ``O(B P N)``, peak memory ``O(chunk P N + B N)``.

    Args:
        margin: triplet margin (0.2).
        mining: ``"semihard"`` or ``"distance_weighted"``.
        cutoff: distance cut-off of the distance-weighted sampling weights (0.5).
        chunk_size: queries per chunk (``None``: from a memory budget).
        normalize: L2-normalise the embeddings first (default ``True``; ``False``: raw dot products).

    Example:
        >>> import torch
        >>> _ = torch.manual_seed(0)
        >>> emb, labels = torch.randn(8, 4), torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
        >>> round(TripletLoss()(emb, labels).item(), 4)
        0.0847
    """

    def __init__(
        self,
        margin: float = 0.2,
        mining: str = "semihard",
        cutoff: float = 0.5,
        chunk_size: int | None = None,
        normalize: bool = True,
    ) -> None:
        super().__init__(normalize=normalize)
        self.margin, self.cutoff = check_positive("margin", margin), check_positive("cutoff", cutoff)
        self.mining = check_mining(mining)
        self.chunk_size = check_chunk_size("chunk_size", chunk_size)

    def retrieval_loss(self, scores: Tensor, inputs: RetrievalInputs, valid: Tensor) -> Tensor:
        return triplet_loss(
            scores,
            binary_positives(inputs, valid),
            valid,
            margin=self.margin,
            mining=self.mining,
            dim=inputs.queries.shape[1],
            cutoff=self.cutoff,
            chunk_size=self.chunk_size,
        )
