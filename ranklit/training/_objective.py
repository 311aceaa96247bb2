"""The training objective of a step: a ranking loss over the batch, the DDP-gathered batch and the memory.

:func:`ranking_objective` is what :class:`ranklit.models.RetrievalModule` minimises. It is written once for the
plain, gathered, memory and multistage paths, so all of them optimise exactly the same function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from ranklit.training._distributed import gather_retrieval_set
from ranklit.training._memory import CrossBatchMemory

__all__ = ["RankingObjective", "ranking_objective"]

LossFn = Callable[..., Tensor]


@dataclass(frozen=True)
class RankingObjective:
    """The value of a step's objective and the largest retrieval set its queries were ranked against.

    Attributes:
        loss: scalar, the value to minimise.
        ref_embeddings, ref_labels, ref_ids: the retrieval set (batch, gathered batch, or memory ∪ batch), e.g. to
            measure the batch AP of :class:`ranklit.metrics.DecomposabilityGap`.
    """

    loss: Tensor
    ref_embeddings: Tensor
    ref_labels: Tensor
    ref_ids: Tensor


def ranking_objective(
    loss_fn: LossFn,
    embeddings: Tensor,
    labels: Tensor,
    ids: Tensor,
    *,
    gather: bool = True,
    memory: CrossBatchMemory | None = None,
    step: int = 0,
) -> RankingObjective:
    """``loss(queries vs R) [+ weight × loss(queries vs memory ∪ R)]`` with ``R`` the batch or the gathered batch.

    * ``R`` is the local batch, or under DDP with ``gather`` the batches of all ranks with gradients
      (:func:`ranklit.training._distributed.gather_retrieval_set`). Every query is excluded from its own ranking by its
      sample id, so a sample drawn twice in a batch (P×K with replacement) is excluded twice, in one process as in
      DDP, and one process with the global batch computes the same loss as the mean over ranks.
    * With a ``memory``, ``R`` (detached) is enqueued first; from ``memory.start_step`` on the queries are also ranked
      against ``memory ∪ R`` and that loss, times ``memory.weight``, is added (XBM, Wang et al. 2020).

    The loss is computed in float32 (float64 stays) with autocast off: under bf16 the cosine scores would have about
    3 significant digits, too few for sigmoid temperatures of 0.01.

    Args:
        loss_fn: a ranklit loss, ``loss_fn(embeddings, labels, *, ref_embeddings, ref_labels, ids, ref_ids)``.
        embeddings: ``[B, D]`` local query embeddings (with gradients).
        labels: ``[B]`` or ``[B, L]``.
        ids: ``[B]`` global sample ids (dataset indices).
        gather: rank against the batches of every rank when a process group is running.
        memory: optional cross-batch memory.
        step: the global step (compared with ``memory.start_step``).

    Cost: the loss's own, on ``B`` queries × ``N`` items, ``N`` = global batch (+ memory size).

    Example:
        >>> from ranklit.losses import SmoothAPLoss
        >>> e = torch.nn.functional.normalize(torch.randn(8, 4), dim=1)
        >>> labels, ids = torch.arange(8) // 4, torch.arange(8)
        >>> out = ranking_objective(SmoothAPLoss(), e, labels, ids)
        >>> bool(torch.isclose(out.loss, SmoothAPLoss()(e, labels))), out.ref_ids.shape[0]
        (True, 8)
    """
    with torch.autocast(embeddings.device.type, enabled=False):
        if embeddings.dtype in (torch.float16, torch.bfloat16):
            embeddings = embeddings.float()
        refs = gather_retrieval_set(embeddings, labels, ids) if gather else (embeddings, labels, ids)
        loss = _ranked(loss_fn, embeddings, labels, ids, refs)
        if memory is not None:
            memory.enqueue(*refs)
            if memory.is_active(step):
                refs = memory.retrieval_set(*refs)
                loss = loss + memory.weight * _ranked(loss_fn, embeddings, labels, ids, refs)
    return RankingObjective(loss, *refs)


def _ranked(loss_fn: LossFn, embeddings: Tensor, labels: Tensor, ids: Tensor, refs: tuple[Tensor, ...]) -> Tensor:
    ref_embeddings, ref_labels, ref_ids = refs
    return loss_fn(embeddings, labels, ref_embeddings=ref_embeddings, ref_labels=ref_labels, ids=ids, ref_ids=ref_ids)
