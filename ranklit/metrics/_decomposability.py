"""The decomposability gap of AP (ROADMAP Eq. 6): how far the mean batch AP is from the AP over the whole set.

AP is not decomposable: a query's AP in a batch differs from its AP in the whole set, and the batch AP averaged over
batches overestimates the global AP when few negatives share a batch. ROADMAP (§3.2, Eq. 6) defines, for query ``i``
and batches ``b = 1..K``::

    DG_AP = (1/K) Σ_b AP_i^b − AP_i

Here both terms are averaged over the queries: ``batch_map`` is the mean, over every (query, batch) pair where the
query has a positive in its batch's retrieval set, of its AP in that retrieval set (the batch itself, the DDP-gathered
batch, or memory ∪ batch: whatever the loss ranks); ``map`` is the mAP of the same samples ranked against each
other; ``gap = batch_map − map``. A larger batch, a DDP gather, a cross-batch memory and ROADMAP's calibration loss
all shrink it. AP uses the finest label (column 0) and the exact ranks of [spec §1][spec-metrics], under the ``ties``
policy of [spec §0][spec-ties] (both terms alike).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities.data import dim_zero_cat

from ranklit.functional import retrieval_metrics, sample_ids
from ranklit.functional.ties import check_ties
from ranklit.metrics._registry import register_metric

__all__ = ["decomposability_gap", "DecomposabilityGap"]


def _finest(labels: Tensor) -> Tensor:
    return labels if labels.ndim == 1 else labels[:, 0]


def _batch_ap_sum(
    embeddings: Tensor, labels: Tensor, ids: Tensor, ties: str, refs: tuple[Tensor, Tensor, Tensor] | None = None
) -> tuple[float, int]:
    """Sum of the APs of the queries with a positive in the retrieval set (the batch by default), and their count."""
    ref_embeddings, ref_labels, ref_ids = refs if refs is not None else (embeddings, labels, ids)
    positives = (_finest(labels)[:, None] == _finest(ref_labels)[None, :]) & (ids[:, None] != ref_ids[None, :])
    count = int(positives.any(dim=1).sum())
    if count == 0:
        return 0.0, 0
    out = retrieval_metrics(
        embeddings,
        _finest(labels),
        ref_embeddings=ref_embeddings,
        ref_labels=_finest(ref_labels),
        ids=ids,
        ref_ids=ref_ids,
        recall_at=(1,),
        ties=ties,
    )
    return float(out["map"]) * count, count


def _global_map(embeddings: Tensor, labels: Tensor, ids: Tensor, ties: str) -> float:
    """mAP of the samples ranked against each other, keeping the last embedding stored for each id."""
    last = sample_ids.latest_per_id(ids)
    out = retrieval_metrics(embeddings[last], _finest(labels[last]), ids=ids[last], recall_at=(1,), ties=ties)
    return float(out["map"])


def _result(ap_sum: float, count: int, global_map: float) -> dict[str, float]:
    if count == 0:
        raise ValueError("No query had a positive in its batch: the batch AP is undefined (use a P x K sampler).")
    batch_map = ap_sum / count
    return {"batch_map": batch_map, "map": global_map, "gap": batch_map - global_map}


def decomposability_gap(
    embeddings: Tensor, labels: Tensor, batches: Sequence[Tensor], *, ties: str = "pessimistic"
) -> dict[str, float]:
    """Decomposability gap of a fixed model: mean batch AP over ``batches`` minus the mAP of the whole set.

    Args:
        embeddings: ``[N, D]`` L2-normalised embeddings of the whole set.
        labels: ``[N]`` or ``[N, L]`` labels (column 0 is used).
        batches: index tensors into the set, e.g. ``list(PKSampler(labels, p, k))``; the batches need not cover the
            set. A sample drawn twice in a batch is excluded from its own ranking in both copies.
        ties: ``"pessimistic"`` (default), ``"average"`` or ``"optimistic"``: AP under the worst ordering of each
            group of equal scores, its mean over the orderings, or the best ([spec §0][spec-ties]), in both terms.

    Returns:
        ``{"batch_map", "map", "gap"}`` (python floats); ``map`` is over the whole set.

    Cost: ``O(Σ_b B_b²)`` for the batches and ``O(N²)`` time, ``O(chunk · N)`` memory for the global mAP.

    Example:
        >>> angles = torch.tensor([0.0, 0.3, 0.1, 0.7]); e = torch.stack([angles.cos(), angles.sin()], 1)
        >>> labels = torch.tensor([0, 0, 1, 1])
        >>> out = decomposability_gap(e, labels, [torch.tensor([0, 1]), torch.tensor([2, 3])])
        >>> out["batch_map"], round(out["map"], 4), round(out["gap"], 4)
        (1.0, 0.4583, 0.5417)
    """
    ties = check_ties(ties)
    positions = torch.arange(embeddings.shape[0], device=embeddings.device)
    total, count = 0.0, 0
    for batch in batches:
        batch = torch.as_tensor(batch, device=embeddings.device).long()
        ap_sum, n = _batch_ap_sum(embeddings[batch], labels[batch], batch, ties)
        total, count = total + ap_sum, count + n
    return _result(total, count, _global_map(embeddings, labels, positions, ties))


@register_metric
class DecomposabilityGap(Metric):
    """Running decomposability gap: the batch AP of each training step against the AP over everything seen.

    Each :meth:`update` is one batch: its queries' AP against the retrieval set the loss ranks them against is added
    to the batch term, and the queries are stored. :meth:`compute` ranks the stored samples (deduplicated by id,
    keeping the last embedding) against each other for the global term. During training the stored embeddings come
    from successive steps, so the global term mixes model states; for a fixed model use :func:`decomposability_gap`.
    :class:`ranklit.models.RetrievalModule` logs it with ``decomposability_gap=True``.

    Memory: the ``N × D`` embeddings seen since the last reset. DDP: sums and stored samples are gathered.

    Args:
        ties: ``"pessimistic"`` (default), ``"average"`` or ``"optimistic"``: the tie policy of both APs
            ([spec §0][spec-ties]).
        **kwargs: options of ``torchmetrics.Metric``.

    Example:
        >>> import torch
        >>> metric = DecomposabilityGap()
        >>> angles = torch.tensor([0.0, 0.3, 0.1, 0.7]); e = torch.stack([angles.cos(), angles.sin()], 1)
        >>> metric.update(e[:2], torch.tensor([0, 0]), torch.tensor([0, 1]))
        >>> metric.update(e[2:], torch.tensor([1, 1]), torch.tensor([2, 3]))
        >>> {k: round(v, 4) for k, v in metric.compute().items()}
        {'batch_map': 1.0, 'map': 0.4583, 'gap': 0.5417}
    """

    is_differentiable = False
    higher_is_better = False
    full_state_update = False

    ap_sum: Tensor
    num_queries: Tensor
    embeddings: list[Tensor]
    labels: list[Tensor]
    ids: list[Tensor]

    def __init__(self, ties: str = "pessimistic", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ties = check_ties(ties)
        self.add_state("ap_sum", default=torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("num_queries", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("embeddings", default=[], dist_reduce_fx="cat")
        self.add_state("labels", default=[], dist_reduce_fx="cat")
        self.add_state("ids", default=[], dist_reduce_fx="cat")

    def update(
        self,
        embeddings: Tensor,
        labels: Tensor,
        ids: Tensor,
        *,
        ref_embeddings: Tensor | None = None,
        ref_labels: Tensor | None = None,
        ref_ids: Tensor | None = None,
    ) -> None:
        """Add one batch: ``[B, D]`` queries with ``[B]``/``[B, L]`` labels and ``[B]`` sample ids.

        Without ``ref_*`` the batch is its own retrieval set; with them (all three), the queries are ranked against
        that set, each without the items of its own id.
        """
        given = [t is not None for t in (ref_embeddings, ref_labels, ref_ids)]
        if any(given) and not all(given):
            raise ValueError("Pass `ref_embeddings`, `ref_labels` and `ref_ids` together, or none of them.")
        refs = (ref_embeddings.detach(), ref_labels, ref_ids) if all(given) else None  # type: ignore[union-attr]
        ap_sum, count = _batch_ap_sum(embeddings.detach(), labels, ids, self.ties, refs)  # type: ignore[arg-type]
        self.ap_sum += ap_sum
        self.num_queries += count
        self.embeddings.append(embeddings.detach())
        self.labels.append(_finest(labels).long())
        self.ids.append(ids.long())

    def compute(self) -> dict[str, float]:
        """``{"batch_map", "map", "gap"}`` over the batches added since the last reset."""
        if isinstance(self.embeddings, list) and not self.embeddings:
            raise ValueError("`DecomposabilityGap.compute` was called before any `update`.")
        embeddings = dim_zero_cat(self.embeddings)
        global_map = _global_map(embeddings, dim_zero_cat(self.labels), dim_zero_cat(self.ids), self.ties)
        return _result(float(self.ap_sum), int(self.num_queries), global_map)

