"""Ranks of the positives of each query, without sorting the retrieval set ([spec §0–1][spec-conventions]).

Every binary retrieval metric is a function of a few numbers per positive ``k`` (:mod:`ranklit.functional.ties`)::

    a + n = #{j in Omega : s_j >= s_k}     (the items scoring at least as high: above and in its tie group)
    a     = #{j in Omega : s_j >  s_k}     (needed by the "average" and "optimistic" tie policies only)

and of the positives' own scores, so only the positives need ordering: sorting the ``R`` positives of a query and
counting, for each of them, the items of the row that score at least as high costs ``O(N log R)`` instead of the
``O(N log N)`` of a full sort, and ``O(N + M R)`` when only ``M`` items score at least as high as the lowest positive
(:func:`~ranklit.functional.metrics._counting.count_at_least`).

Items removed from a query's ranking (the query itself, junk) carry the score ``-inf``: they never count in a rank and
are never positives.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ranklit.functional.metrics._counting import count_at_least
from ranklit.functional.ties import strictly_above_thresholds, tie_positives

__all__ = ["SortedKeys", "concat_counts", "sort_positive_scores", "positive_counts", "positive_ranks"]


class SortedKeys:
    """The retrieval set's keys (a label column or the ids) sorted once, to find each query's matches in ``O(log N)``.

    Items sharing a key form a contiguous run of the sorted order, so the matches of a query are a slice: no
    ``[Q, N]`` comparison is needed.

    Args:
        keys: ``[N]`` integer keys of the retrieval set.

    Example:
        >>> index, valid = SortedKeys(torch.tensor([3, 1, 3, 2])).match(torch.tensor([3, 5]))
        >>> index.tolist(), valid.tolist()
        ([[0, 2], [0, 0]], [[True, True], [False, False]])
    """

    def __init__(self, keys: Tensor) -> None:
        self.keys, self.order = torch.sort(keys, stable=True)

    def count(self, query_keys: Tensor) -> Tensor:
        """``[C]`` number of retrieval-set items whose key equals each query's key."""
        query_keys = query_keys.contiguous()
        return torch.searchsorted(self.keys, query_keys, right=True) - torch.searchsorted(self.keys, query_keys)

    def runs(self, query_keys: Tensor) -> tuple[Tensor, Tensor]:
        """``([C] start, [C] count)``: the matches of each query are the sorted positions ``start .. start + count``.

        >>> [t.tolist() for t in SortedKeys(torch.tensor([3, 1, 3, 2])).runs(torch.tensor([3, 5]))]
        [[2, 4], [2, 0]]
        """
        query_keys = query_keys.contiguous()
        return torch.searchsorted(self.keys, query_keys), self.count(query_keys)

    def match(self, query_keys: Tensor) -> tuple[Tensor, Tensor]:
        """Columns whose key equals each query's key.

        Args:
            query_keys: ``[C]`` integer keys of a chunk of queries.

        Returns:
            ``(index, valid)``, both ``[C, W]`` with ``W`` the largest number of matches of a query; ``index`` holds
            retrieval-set columns (padding points at column 0), ``valid`` says which entries are real.
        """
        start, count = self.runs(query_keys)
        width = int(count.max()) if count.numel() else 0
        offsets = torch.arange(width, device=query_keys.device)
        valid = offsets[None, :] < count[:, None]
        position = (start[:, None] + offsets[None, :]).clamp(max=max(self.keys.numel() - 1, 0))
        index = torch.where(valid, self.order[position], torch.zeros_like(position))
        return index, valid


def sort_positive_scores(scores: Tensor, index: Tensor, valid: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The scores of each query's positives in decreasing order, and their ranks among the positives.

    Args:
        scores: ``[C, N]`` scores of a chunk of queries; removed items hold ``-inf``.
        index: ``[C, P]`` columns of the candidate positives (see :meth:`SortedKeys.match`).
        valid: ``[C, P]`` which entries of ``index`` are real; positives scoring ``-inf`` (removed) are dropped.

    Returns:
        ``(descending, rank_pos, valid, order)``, each ``[C, W]`` with ``W`` the most positives of a query: the
        positives' scores sorted in decreasing order (``-inf`` after the real ones), ``rank+`` of each (``0`` where not
        real), which entries are real, and where each sorted entry was in ``index`` (to sort anything else alike).

    Example:
        >>> s = torch.tensor([[0.9, 0.5, 0.7, 0.5, 0.1]])
        >>> out = sort_positive_scores(s, torch.tensor([[4, 3, 0]]), torch.ones(1, 3, dtype=torch.bool))
        >>> descending, rank_pos, ok, order = out
        >>> descending.tolist(), rank_pos.tolist(), order.tolist()
        ([[0.8999999761581421, 0.5, 0.10000000149011612]], [[1, 2, 3]], [[2, 1, 0]])
    """
    positive_scores = scores.gather(1, index)
    valid = valid & torch.isfinite(positive_scores)
    num_positives = valid.sum(dim=1, keepdim=True)
    width = int(num_positives.max()) if num_positives.numel() else 0
    descending, order = torch.where(valid, positive_scores, float("-inf")).sort(dim=1, descending=True)
    descending, order = descending[:, :width].contiguous(), order[:, :width]
    valid = torch.arange(width, device=scores.device)[None, :] < num_positives  # real positives first, then -inf
    rank_pos = width - torch.searchsorted(descending.flip(1).contiguous(), descending)  # positives not strictly below
    return descending, torch.where(valid, rank_pos, 0), valid, order


def positive_counts(
    scores: Tensor, index: Tensor, valid: Tensor, *, strict: bool = False
) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """The positives of each query by decreasing score, and the items scoring at least as high as each.

    Args:
        scores: ``[C, N]`` scores of a chunk of queries; removed items hold ``-inf``.
        index: ``[C, P]`` columns of the candidate positives (see :meth:`SortedKeys.match`).
        valid: ``[C, P]`` which entries of ``index`` are real; positives scoring ``-inf`` (removed) are dropped.
        strict: also count the items scoring strictly higher (for the ``"average"`` and ``"optimistic"`` ties).

    Returns:
        ``(descending, valid, at_least, above)``, each ``[C, W]`` with ``W`` the most positives of a query: the
        positives' scores in decreasing order, which entries are real (first in each row), ``#{j : s_j >= s}`` and
        ``#{j : s_j > s}`` (``None`` unless ``strict``) as int64.

    Memory: ``O(C * N)``.
    """
    descending, _, valid, _ = sort_positive_scores(scores, index, valid)
    at_least = torch.where(valid, count_at_least(scores, descending), 0)
    above = None
    if strict:
        above = torch.where(valid, count_at_least(scores, strictly_above_thresholds(descending)), 0)
    return descending, valid, at_least, above


_Counts = tuple[Tensor, Tensor, Tensor, Tensor | None]  # what positive_counts returns


def concat_counts(parts: list[_Counts]) -> _Counts:
    """The :func:`positive_counts` of consecutive blocks of rows as those of all the rows at once: each block padded
    to the widest (``-inf`` scores, not real, counts 0), then concatenated.

    Example:
        >>> one = positive_counts(torch.tensor([[0.9, 0.5]]), torch.tensor([[0]]), torch.tensor([[True]]))
        >>> two = positive_counts(torch.tensor([[0.2, 0.7, 0.4]]), torch.tensor([[0, 2]]), torch.ones(1, 2).bool())
        >>> descending, valid, at_least, _ = concat_counts([one, two])
        >>> descending.tolist(), at_least.tolist()
        ([[0.8999999761581421, -inf], [0.4000000059604645, 0.20000000298023224]], [[1, 0], [2, 3]])
    """
    width = max(part[0].shape[1] for part in parts)

    def padded(tensor: Tensor, value: float | bool) -> Tensor:
        return torch.nn.functional.pad(tensor, (0, width - tensor.shape[1]), value=value)

    above = None if parts[0][3] is None else torch.cat([padded(p[3], 0) for p in parts])  # type: ignore[arg-type]
    return (torch.cat([padded(p[0], float("-inf")) for p in parts]), torch.cat([padded(p[1], False) for p in parts]),
            torch.cat([padded(p[2], 0) for p in parts]), above)


def positive_ranks(scores: Tensor, index: Tensor, valid: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Pessimistic ``rank`` and ``rank+`` of the positives of each query, positives ordered by decreasing score.

    Pessimistic: the worst ordering of each group of equal scores, its negatives first, then its positives one after
    the other ([spec §0][spec-ties]).

    Args:
        scores, index, valid: as for :func:`positive_counts`.

    Returns:
        ``(rank, rank_pos, valid)``, each ``[C, W]`` int64 (``0`` where not real); real entries come first in a row.

    Example:
        >>> s = torch.tensor([[0.9, 0.5, 0.7, 0.5, 0.1]])
        >>> rank, rank_pos, ok = positive_ranks(s, torch.tensor([[0, 3, 4]]), torch.tensor([[True, True, True]]))
        >>> rank.tolist(), rank_pos.tolist()
        ([[1, 4, 5]], [[1, 2, 3]])
    """
    descending, valid, at_least, _ = positive_counts(scores, index, valid)
    tied = tie_positives(descending, valid, at_least, None, "pessimistic")
    assert tied.rank is not None and tied.rank_pos is not None
    return torch.where(valid, tied.rank, 0).long(), torch.where(valid, tied.rank_pos, 0).long(), valid
