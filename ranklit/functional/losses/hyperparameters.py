"""The checks of the losses' hyper-parameters and labels that the functional losses and their ``nn.Module`` forms
share (a module checks at construction, so a bad value fails when the config is read, not at the first step).

Each raises a plain sentence naming the argument, the expected and the received value.
"""

from __future__ import annotations

from torch import Tensor

from ranklit._checks import check_in_range
from ranklit.errors import UserError
from ranklit.functional._kernels._rank_engine import check_engine, check_engine_runs  # the smooth-rank losses' `engine`
from ranklit.functional.reducers import MeanReducer, Reducer, get_reducer

__all__ = [
    "CALIBRATION_REDUCTIONS",
    "check_class_ids",
    "check_engine",
    "check_engine_runs",
    "check_margins",
    "check_mining",
    "check_reduction",
]

CALIBRATION_REDUCTIONS = ("query", "batch_active")


def check_reduction(reduction: str, reducer: str | Reducer = "mean") -> str:
    """``reduction`` if it is one of :data:`CALIBRATION_REDUCTIONS` and, for ``"batch_active"`` (a mean over the pairs
    of the batch, not over queries), ``reducer`` is ``"mean"``.

    >>> check_reduction("batch_active")
    'batch_active'
    """
    if reduction not in CALIBRATION_REDUCTIONS:
        raise UserError(f"`reduction` must be one of {CALIBRATION_REDUCTIONS}, got {reduction!r}.")
    if reduction == "batch_active" and not isinstance(get_reducer(reducer), MeanReducer):
        raise UserError(
            f"reduction='batch_active' averages the hinges over the pairs of the whole batch, so it takes no per-query "
            f"reducer (got {reducer!r}): use reduction='query' with that reducer, or reducer='mean'."
        )
    return reduction


def check_margins(pos_name: str, pos_margin: float, neg_name: str, neg_margin: float) -> None:
    """Both thresholds in ``[-1, 1]`` (cosine range) and the negative one not above the positive one.

    >>> check_margins("alpha", 0.5, "beta", 0.9)
    Traceback (most recent call last):
    ...
    ValueError: `beta` (0.9) must not exceed `alpha` (0.5): negatives are pushed below `beta`, positives above `alpha`.
    """
    check_in_range(pos_name, pos_margin, -1.0, 1.0)
    check_in_range(neg_name, neg_margin, -1.0, 1.0)
    if neg_margin > pos_margin:
        raise ValueError(
            f"`{neg_name}` ({neg_margin}) must not exceed `{pos_name}` ({pos_margin}): negatives are pushed below "
            f"`{neg_name}`, positives above `{pos_name}`."
        )


def check_class_ids(class_ids: Tensor, num_classes: int, name: str = "labels") -> None:
    """Raise ``ValueError`` unless every fine class id lies in ``[0, num_classes)``.

    >>> import torch
    >>> check_class_ids(torch.tensor([0, 2]), 3)
    >>> check_class_ids(torch.tensor([0, 3]), 3)
    Traceback (most recent call last):
    ...
    ValueError: `labels` (column 0, fine classes) must lie in [0, 3) to index the proxies, got ids from 0 to 3. ...
    """
    low, high = int(class_ids.min()), int(class_ids.max())
    if low < 0 or high >= num_classes:
        raise ValueError(
            f"`{name}` (column 0, fine classes) must lie in [0, {num_classes}) to index the proxies, got ids from "
            f"{low} to {high}. Set `num_classes` to the number of fine training classes and remap the class ids to "
            "0..num_classes-1."
        )


_MINING = ("semihard", "distance_weighted")


def check_mining(mining: str) -> str:
    """Raise ``ValueError`` unless ``mining`` is ``"semihard"`` or ``"distance_weighted"``.

    >>> check_mining("semihard")
    'semihard'
    """
    if mining not in _MINING:
        raise ValueError(f"`mining` must be one of {_MINING}, got {mining!r}.")
    return mining
