"""The Σ baselines of the HAPPIER tables: a binary loss summed over the levels of the hierarchy."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from ranklit.functional.inputs import RetrievalInputs
from ranklit.losses._registry import register_loss
from ranklit.losses._smooth_rank import SupAPLoss
from ranklit.losses.base import EmbeddingLoss

__all__ = ["LevelSumLoss"]


@register_loss(
    summary="a binary loss summed over hierarchy levels",
    paper="HAPPIER's Σ baselines",
    examples={"": {"losses": SupAPLoss}},
)
class LevelSumLoss(EmbeddingLoss):
    """``sum_h loss_h(embeddings, labels[:, h])``: each binary loss sees positives = same label at column ``h``.

    This is the "Σ" family of HAPPIER's tables (e.g. Σ TL_SH, Σ NSM, Σ ROADMAP). Pass one loss to apply it at every
    level (parameter-free losses), or one loss per label column, finest first (needed for proxy losses, whose
    ``num_classes`` differs per level). Each loss gets the validated call with the matching label column (an in-batch
    call as the batch itself with ids = positions, the same ranking problem) and normalises the embeddings itself
    (its ``normalize`` option). Cost: the sum of the losses' costs.

    Args:
        losses: a binary loss module, or a sequence of them, one per label column.

    Example:
        >>> import torch
        >>> _ = torch.manual_seed(0)
        >>> emb = torch.randn(8, 4)
        >>> labels = torch.tensor([[0, 0], [0, 0], [1, 0], [1, 0], [2, 1], [2, 1], [3, 1], [3, 1]])
        >>> round(LevelSumLoss(SupAPLoss())(emb, labels).item(), 4)
        1.9328
        >>> round(SupAPLoss()(emb, labels[:, 0]).item() + SupAPLoss()(emb, labels[:, 1]).item(), 4)
        1.9328
    """

    def __init__(self, losses: nn.Module | Sequence[nn.Module]) -> None:
        super().__init__(normalize=False)  # each loss normalises the embeddings itself
        if isinstance(losses, nn.Module) and not isinstance(losses, nn.ModuleList):
            losses = [losses]
        losses = list(losses)
        if not losses or not all(isinstance(loss, nn.Module) for loss in losses):
            raise TypeError("`losses` must be an nn.Module or a non-empty sequence of nn.Module (one per level).")
        self.losses = nn.ModuleList(losses)

    def embedding_loss(self, inputs: RetrievalInputs) -> Tensor:
        """Sum over the label columns of the loss of each column, called with the same retrieval set and ids."""
        if len(self.losses) not in (1, inputs.num_levels):
            raise ValueError(
                f"LevelSumLoss holds {len(self.losses)} losses but the labels have {inputs.num_levels} columns: pass "
                "one loss for every level, or a single loss to apply at each level."
            )
        total = inputs.queries.new_zeros(())
        for h in range(inputs.num_levels):
            loss = self.losses[h if len(self.losses) > 1 else 0]
            total = total + loss(
                inputs.queries, inputs.query_labels[:, h], ref_embeddings=inputs.refs,
                ref_labels=inputs.ref_labels[:, h], ids=inputs.query_ids, ref_ids=inputs.ref_ids,
            )
        return total
