"""Tie groups of the ranked positives and the three tie policies ([spec §0][spec-ties]).

Equal scores form a *tie group*, whose order the scores do not define. For a positive ``k`` in a group of ``n`` items
(``p`` of them positives) with ``a`` items (``a+`` positives) scoring strictly higher, every policy is a function of
``(a, n, a+, p)`` and of the index ``i = 1..p`` of ``k`` among the group's positives:

* ``"pessimistic"``: the group's negatives first, then its positives: ``rank = a + n - p + i``, ``rank+ = a+ + i``;
* ``"optimistic"``: its positives first: ``rank = a + i``, ``rank+ = a+ + i``;
* ``"average"``: the expectation over the ``n!`` orderings, in closed form from ``(a, n, a+, p)``
  (:mod:`ranklit.functional.metrics.binary`).

``a + n = #{j : s_j >= s_k}`` and ``a = #{j : s_j > s_k}`` are counts over the row; ``p``, ``i`` and ``a+`` follow from
the positives' own scores sorted in decreasing order. Only the pessimistic policy can do without ``a`` (one count per
positive instead of two).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ranklit._checks import check_choice

__all__ = [
    "TIES",
    "TiedPositives",
    "TiedScoresWarning",
    "check_ties",
    "group_bounds",
    "tie_positives",
    "strictly_above_thresholds",
]

TIES = ("pessimistic", "average", "optimistic")


class TiedScoresWarning(UserWarning):
    """Emitted once per evaluation by ``retrieval_metrics``/``RetrievalMetrics`` when a large share of the scores tie
    and the figures depend on the ``ties`` policy (:mod:`ranklit.functional.metrics._tie_share`); filter it by this
    class."""


def check_ties(ties: str) -> str:
    """Raise ``ValueError`` unless ``ties`` is one of :data:`TIES`.

    >>> check_ties("average")
    'average'
    """
    meaning = ("the value of a metric under the worst ordering of each group of equal scores, the mean over its "
               "orderings, or the best: docs/spec.md §0, Ranks and ties")
    return check_choice("ties", ties, TIES, meaning)


def strictly_above_thresholds(descending: Tensor) -> Tensor:
    """Thresholds whose "at least" counts are the "strictly above" counts of ``descending`` (the next float up).

    ``-inf`` padding stays ``-inf`` (its counts are never read).

    >>> strictly_above_thresholds(torch.tensor([[1.0, float("-inf")]])).tolist()
    [[1.0000001192092896, -inf]]
    """
    return torch.where(torch.isfinite(descending), torch.nextafter(descending, torch.full_like(descending, torch.inf)),
                       descending)


def group_bounds(descending: Tensor) -> tuple[Tensor, Tensor]:
    """``[C, W]`` first and last entry of each entry's group of equal scores (``descending`` sorted in each row).

    >>> start, end = group_bounds(torch.tensor([[3.0, 3.0, 1.0]]))
    >>> start.tolist(), end.tolist()
    ([[0, 0, 2]], [[1, 1, 2]])
    """
    num_rows, width = descending.shape
    position = torch.arange(width, device=descending.device).expand(num_rows, width)
    is_start = torch.ones_like(descending, dtype=torch.bool)
    is_start[:, 1:] = descending[:, 1:] != descending[:, :-1]
    is_end = torch.ones_like(is_start)
    is_end[:, :-1] = is_start[:, 1:]
    start = torch.where(is_start, position, 0).cummax(1).values
    end = torch.where(is_end, position, width).flip(1).cummin(1).values.flip(1)
    return start, end


@dataclass(frozen=True)
class TiedPositives:
    """The positives of a chunk of queries, with their tie groups, under one tie policy.

    Every tensor is ``[C, W]`` float64 over the entries of a list sorted by decreasing score (entries that are not
    positives hold meaningless values and are masked by ``positive``).

    Attributes:
        ties: the policy.
        positive: ``[C, W]`` bool, which entries are positives.
        num_positives: ``[C]`` float64, ``R``.
        first: ``[C, 1]`` int64, the entry of each row's best positive (0 when the row has none).
        rank: rank of each positive under the policy's ordering (``None`` for ``"average"``).
        rank_pos: its rank among the positives (``None`` for ``"average"``).
        above: ``a``, items scoring strictly higher (``None`` for ``"pessimistic"``).
        size: ``n``, items of its tie group (``None`` for ``"pessimistic"``).
        above_pos: ``a+``, positives scoring strictly higher.
        group_pos: ``p``, positives of its tie group.
    """

    ties: str
    positive: Tensor
    num_positives: Tensor
    first: Tensor
    rank: Tensor | None
    rank_pos: Tensor | None
    above: Tensor | None
    size: Tensor | None
    above_pos: Tensor
    group_pos: Tensor


def tie_positives(
    descending: Tensor, positive: Tensor, at_least: Tensor, above: Tensor | None, ties: str
) -> TiedPositives:
    """The tie groups of the positives of each row and their ranks under ``ties``.

    Args:
        descending: ``[C, W]`` scores of the ranked entries in decreasing order (``-inf`` padding last).
        positive: ``[C, W]`` bool, which entries are positives (a subset of the real entries).
        at_least: ``[C, W]`` ``#{j in Omega : s_j >= s}`` for each entry (``a + n``).
        above: ``[C, W]`` ``#{j in Omega : s_j > s}`` (``a``); may be ``None`` only for ``"pessimistic"``.
        ties: ``"pessimistic"``, ``"average"`` or ``"optimistic"``.

    Example:
        Two positives tied at the top with one negative, then a positive below two negatives:

        >>> d = torch.tensor([[0.9, 0.9, 0.1]])
        >>> t = tie_positives(d, torch.ones(1, 3, dtype=torch.bool), torch.tensor([[3, 3, 6]]),
        ...                   torch.tensor([[0, 0, 5]]), "pessimistic")
        >>> t.rank.tolist(), t.rank_pos.tolist()
        ([[2.0, 3.0, 6.0]], [[1.0, 2.0, 3.0]])
    """
    if above is None and ties != "pessimistic":
        raise ValueError(f"ties={ties!r} needs the counts of the items scoring strictly higher (`above`).")
    start, end = group_bounds(descending)
    count = positive.to(torch.int64).cumsum(1)
    above_pos = count.gather(1, start) - positive.gather(1, start).to(torch.int64)
    group_pos = count.gather(1, end) - above_pos
    index = (count - above_pos).to(torch.float64)
    above_pos, group_pos = above_pos.to(torch.float64), group_pos.to(torch.float64)
    at_least = at_least.to(torch.float64)
    above_f = None if above is None else above.to(torch.float64)
    rank = rank_pos = size = None
    if ties == "pessimistic":
        rank = at_least - group_pos + index
    elif ties == "optimistic" and above_f is not None:
        rank = above_f + index
    if ties != "average":
        rank_pos = above_pos + index
    if above_f is not None:
        size = at_least - above_f
    return TiedPositives(
        ties=ties,
        positive=positive,
        num_positives=positive.sum(1).to(torch.float64),
        first=_first_true(positive),
        rank=rank,
        rank_pos=rank_pos,
        above=above_f,
        size=size,
        above_pos=above_pos,
        group_pos=group_pos,
    )


def _first_true(mask: Tensor) -> Tensor:
    """``[C, 1]`` index of the first ``True`` of each row (0 for a row without one, or without columns)."""
    if mask.shape[1] == 0:
        return torch.zeros(mask.shape[0], 1, dtype=torch.int64, device=mask.device)
    return mask.to(torch.int8).argmax(1, keepdim=True)
