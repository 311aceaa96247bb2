"""Helpers on sample ids (the dataset index each embedding carries), shared by the cross-batch memory
(:mod:`ranklit.training._memory`) and the decomposability gap (:mod:`ranklit.metrics._decomposability`)."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["latest_per_id"]


def latest_per_id(ids: Tensor) -> Tensor:
    """Positions of the last occurrence of every distinct id, in increasing id order.

    Time ``O(n log n)`` (a sort), memory ``O(n)``.

    >>> latest_per_id(torch.tensor([7, 3, 7, 5, 3])).tolist()
    [4, 3, 2]
    """
    unique, inverse = torch.unique(ids, return_inverse=True)
    positions = torch.arange(ids.shape[0], device=ids.device)
    return torch.full_like(unique, -1).scatter_reduce(0, inverse, positions, reduce="amax")
