"""Reducers: how a ranking loss turns its per-query terms into the value it returns (after pytorch-metric-learning).

Every ranking loss computes one term per query (for an AP loss ``1 - AP_q``) and a ``[Q]`` mask of the queries
that count (those with a positive, or a relevant item for H-AP), then hands both, with each query's finest class,
to a :class:`Reducer`. The built-in reducers, chosen by name (``reducer="mean"``) or as an object:

- ``"mean"`` (:class:`MeanReducer`, the default): ``(1/|Q+|) sum_{q in Q+} t_q`` over the queries ``Q+`` that count;
- ``"class_balanced"`` (:class:`ClassBalancedReducer`): the mean over the classes of ``Q+`` of the mean of their
  queries' terms, so every class of the batch weighs the same (Revaud et al., ICCV 2019, §4.2);
- ``"active"`` (:class:`ActiveReducer`): the mean over the queries of ``Q+`` whose term is non-zero (as
  pytorch-metric-learning's ``AvgNonZeroReducer``), 0 when there is none;
- ``"none"`` (:class:`NoReducer`): the ``[Q]`` vector of the terms; a query that does not count (no positive in its
  retrieval set) gets 0 and no gradient.

A reducer is an extension point: subclass :class:`Reducer` and implement :meth:`Reducer.reduce`. Cost ``O(Q)``.

Example:
    >>> import torch
    >>> terms, keep = torch.tensor([0.5, 0.0, 0.25, 9.0]), torch.tensor([True, True, True, False])
    >>> classes = torch.tensor([0, 1, 1, 2])
    >>> [round(float(get_reducer(name)(terms, keep, classes)), 4) for name in ("mean", "class_balanced", "active")]
    [0.25, 0.3125, 0.375]
    >>> get_reducer("none")(terms, keep, classes).tolist()
    [0.5, 0.0, 0.25, 0.0]
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor

from ranklit.errors import UserError

__all__ = [
    "Reducer",
    "MeanReducer",
    "ClassBalancedReducer",
    "ActiveReducer",
    "NoReducer",
    "REDUCERS",
    "get_reducer",
]


class Reducer:
    """Base class of the reducers: ``reducer(terms, keep, classes)`` -> the loss a ranking loss returns.

    Subclasses implement :meth:`reduce` and set ``per_query = True`` when they return one value per query.

    Example:
        >>> import torch
        >>> class WorstQuery(Reducer):
        ...     def reduce(self, terms, keep, classes):
        ...         return torch.where(keep, terms, torch.zeros_like(terms)).max()
        >>> WorstQuery()(torch.tensor([0.2, 0.7, 0.9]), torch.tensor([True, True, False])).item()
        0.699999988079071
    """

    name: ClassVar[str] = ""
    per_query: ClassVar[bool] = False

    def __call__(self, terms: Tensor, keep: Tensor, classes: Tensor | None = None) -> Tensor:
        """Reduce the ``[Q]`` ``terms`` of the queries where the ``[Q]`` bool ``keep`` holds.

        Args:
            terms: ``[Q]`` per-query loss terms (any value where ``keep`` is ``False``; it is not used).
            keep: ``[Q]`` bool, the queries that count (a positive in their retrieval set).
            classes: ``[Q]`` integer finest class of each query (needed by ``"class_balanced"``).
        """
        if terms.ndim != 1 or keep.shape != terms.shape:
            shapes = f"{tuple(terms.shape)} and {tuple(keep.shape)}"
            raise ValueError(f"a reducer takes [Q] terms and a [Q] bool mask of the same shape, got {shapes}.")
        return self.reduce(terms, keep, classes)

    def reduce(self, terms: Tensor, keep: Tensor, classes: Tensor | None) -> Tensor:
        """The reduction itself (``terms``, ``keep`` and ``classes`` as in :meth:`__call__`)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _kept(terms: Tensor, keep: Tensor) -> Tensor:
    """The terms, 0 where ``keep`` is ``False`` (and no gradient there, even for a NaN or infinite term)."""
    return torch.where(keep, terms, torch.zeros_like(terms))


class MeanReducer(Reducer):
    """``(1/|Q+|) sum_{q in Q+} t_q``: the mean over the queries that count (the default, ``"mean"``).

    Example:
        >>> terms, keep = torch.tensor([0.5, 0.0, 1.0, 0.2]), torch.tensor([True, True, True, False])
        >>> MeanReducer()(terms, keep).item()
        0.5
    """

    name = "mean"

    def reduce(self, terms: Tensor, keep: Tensor, classes: Tensor | None) -> Tensor:
        return _kept(terms, keep).sum() / keep.sum().clamp(min=1)


class ClassBalancedReducer(Reducer):
    """``(1/|C|) sum_{c in C} mean_{q in Q+, y_q = c} t_q``: every class present among the queries that count weighs
    the same (``"class_balanced"``; Revaud et al., ICCV 2019, §4.2). Needs ``classes``.

    Example:
        >>> terms, keep = torch.tensor([0.5, 0.0, 1.0, 0.2]), torch.tensor([True, True, True, False])
        >>> ClassBalancedReducer()(terms, keep, torch.tensor([0, 0, 1, 1])).item()  # (0.5 + 0) / 2 and 1.0
        0.625
    """

    name = "class_balanced"

    def reduce(self, terms: Tensor, keep: Tensor, classes: Tensor | None) -> Tensor:
        if classes is None or classes.shape != terms.shape:
            raise UserError(
                "reducer 'class_balanced' needs the [Q] class of each query (`query_classes`): pass the queries' "
                "finest labels, or use reducer='mean'."
            )
        kept = keep.nonzero().squeeze(1)
        if kept.numel() == 0:
            return _kept(terms, keep).sum()
        _, inverse = torch.unique(classes[kept], return_inverse=True)
        sizes = torch.zeros(int(inverse.max()) + 1, dtype=terms.dtype, device=terms.device)
        sizes = sizes.index_add(0, inverse, torch.ones_like(terms[kept]))
        weights = 1.0 / sizes[inverse]
        return (weights * terms[kept]).sum() / weights.sum()


class ActiveReducer(Reducer):
    """``mean_{q in Q+, t_q != 0} t_q``: the mean over the queries whose term is non-zero, 0 when none is
    (``"active"``, pytorch-metric-learning's ``AvgNonZeroReducer`` over queries).

    Example:
        >>> terms, keep = torch.tensor([0.5, 0.0, 1.0, 0.2]), torch.tensor([True, True, True, False])
        >>> ActiveReducer()(terms, keep).item()
        0.75
    """

    name = "active"

    def reduce(self, terms: Tensor, keep: Tensor, classes: Tensor | None) -> Tensor:
        active = keep & (terms.detach() != 0)
        return _kept(terms, active).sum() / active.sum().clamp(min=1)


class NoReducer(Reducer):
    """The ``[Q]`` terms themselves (``"none"``); a query that does not count gets 0 and no gradient.

    Example:
        >>> terms, keep = torch.tensor([0.5, 0.0, 1.0, 0.2]), torch.tensor([True, True, True, False])
        >>> NoReducer()(terms, keep).tolist()
        [0.5, 0.0, 1.0, 0.0]
    """

    name = "none"
    per_query = True

    def reduce(self, terms: Tensor, keep: Tensor, classes: Tensor | None) -> Tensor:
        return _kept(terms, keep)


REDUCERS: dict[str, type[Reducer]] = {
    cls.name: cls for cls in (MeanReducer, ClassBalancedReducer, ActiveReducer, NoReducer)
}


def get_reducer(reducer: str | Reducer) -> Reducer:
    """The :class:`Reducer` named ``reducer`` (one of :data:`REDUCERS`), or ``reducer`` itself if it is one.

    >>> get_reducer("class_balanced")
    ClassBalancedReducer()
    """
    if isinstance(reducer, Reducer):
        return reducer
    if isinstance(reducer, str) and reducer in REDUCERS:
        return REDUCERS[reducer]()
    raise UserError(f"`reducer` must be one of {tuple(REDUCERS)} or a ranklit.functional.Reducer, got {reducer!r}.")
