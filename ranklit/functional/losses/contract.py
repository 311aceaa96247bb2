"""Checks and reductions shared by the functional losses.

Every functional loss takes ``scores`` ``[Q, N]`` (query ``q`` against item ``j`` of its retrieval set), a boolean
``positives`` mask ``[Q, N]`` and an optional boolean ``valid`` mask ``[Q, N]`` (``False`` = the item is removed from
that query's ranking, e.g. the query itself). The helpers here validate those arguments and hyper-parameters with
plain-sentence errors, and end every AP loss the same way: its per-query terms ``1 - AP_q`` handed to a reducer
(:mod:`ranklit.functional.reducers`; by default the mean over the queries that have a positive,
[spec §0][spec-conventions]).
"""

from __future__ import annotations

import math
from typing import cast

import torch
from torch import Tensor

from ranklit._checks import check_chunk_size, check_in_range
from ranklit.functional.ranking import default_chunk_size
from ranklit.functional.reducers import Reducer, get_reducer

__all__ = [
    "check_offset",
    "check_score_masks",
    "require_positive_queries",
    "reduce_ap_loss",
    "resolve_chunk_size",
]

_NO_POSITIVE = (
    "no query has a positive in its retrieval set (another item with the same fine label), so the ranking loss is "
    "undefined. Sample batches with several images per class, e.g. `ranklit.data.PKSampler(labels, p, k)` with "
    "k >= 2 (P classes x K images)."
)


def check_score_masks(scores: Tensor, positives: Tensor, valid: Tensor | None) -> Tensor:
    """Validate ``scores`` ``[Q, N]`` and the boolean ``positives``/``valid`` masks of the same shape.

    Returns:
        The ``valid`` mask (all ``True`` when ``None`` was given), ``[Q, N]`` bool.

    >>> check_score_masks(torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.bool), None).all().item()
    True
    """
    if not isinstance(scores, Tensor) or not scores.is_floating_point() or scores.ndim != 2:
        raise ValueError(f"`scores` must be a floating-point [Q, N] tensor, got {_describe(scores)}.")
    if not torch.isfinite(scores.detach()).all():
        raise ValueError("`scores` contains NaN or infinite values; check the embeddings and the learning rate.")
    for name, mask in (("positives", positives), ("valid", valid)):
        if mask is None:
            continue
        if not isinstance(mask, Tensor) or mask.dtype != torch.bool or mask.shape != scores.shape:
            raise ValueError(
                f"`{name}` must be a bool tensor of the scores' shape {tuple(scores.shape)}, got {_describe(mask)}."
            )
    return torch.ones_like(scores, dtype=torch.bool) if valid is None else valid


def require_positive_queries(positives: Tensor) -> Tensor:
    """``[Q]`` mask of the queries with at least one positive; ``ValueError`` when there is none at all.

    >>> require_positive_queries(torch.tensor([[True, False], [False, False]])).tolist()
    [True, False]
    """
    has_positive = positives.any(dim=1)
    if not bool(has_positive.any()):
        raise ValueError(_NO_POSITIVE)
    return has_positive


def reduce_ap_loss(
    ap: Tensor, keep: Tensor, reducer: str | Reducer = "mean", query_classes: Tensor | None = None
) -> Tensor:
    """The ending of every AP loss: the per-query terms ``1 - AP_q`` handed to the ``reducer``
    (:mod:`ranklit.functional.reducers`; ``"mean"``: ``1 - mean_{q in keep} AP_q``).

    Args:
        ap: ``[Q]`` per-query (surrogate) AP.
        keep: ``[Q]`` bool, the queries that count (those with a positive).
        reducer: ``"mean"``, ``"class_balanced"``, ``"active"``, ``"none"`` or a :class:`Reducer`.
        query_classes: ``[Q]`` finest class of each query (``"class_balanced"`` needs it).

    >>> reduce_ap_loss(torch.tensor([1.0, 0.5, 0.0]), torch.tensor([True, True, False])).item()
    0.25
    """
    return get_reducer(reducer)(1.0 - ap, keep, query_classes)


def check_offset(offset: float | None) -> float | None:
    """``None`` or a finite number >= 0: the value of SupAP's ``H^-`` just after ``delta`` ([spec §2][spec-losses]).

    >>> check_offset(1.44), check_offset(None)
    (1.44, None)
    """
    return None if offset is None else check_in_range("offset", offset, 0.0, math.inf)


def resolve_chunk_size(chunk_size: int | None, num_queries: int, row_width: int, num_refs: int) -> int:
    """The user's ``chunk_size`` (validated) or :func:`ranklit.functional.ranking.default_chunk_size`.

    >>> resolve_chunk_size(None, 10, 2, 10), resolve_chunk_size(3, 10, 2, 10)
    (10, 3)
    """
    if chunk_size is None:
        return default_chunk_size(num_queries, row_width, num_refs)
    return cast(int, check_chunk_size("chunk_size", chunk_size))


def _describe(value: object) -> str:
    if isinstance(value, Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return type(value).__name__
