"""Validation and preparation of the inputs shared by every loss and metric.

A *retrieval problem* is a set of queries (embeddings ``[Q, D]``, labels ``[Q]`` or ``[Q, L]``) ranked against a
retrieval set (``[N, D]``, ``[N]`` or ``[N, L]``). Without a separate retrieval set the queries rank the batch itself
and each query is excluded from its own ranking ([spec §0][spec-conventions]). With one, an item is excluded from a
query's ranking when its id equals the query's id.

Embeddings are L2-normalised here by default (``normalize=True``), inside the autograd graph, so raw network
features give cosine scores and their gradients flow through the normalisation ([spec §0][spec-conventions]);
``normalize=False`` keeps raw dot products. Labels must be integer tensors (a float or bool label is refused, never
cast). This module is the one place where losses, metrics and the functional API check what they receive.

Labels are always handled as a ``[*, L]`` integer matrix, column 0 the finest level. The *level* of an item with
respect to a query is the number of columns, counted from the coarsest, on which they agree (``L`` = same fine label,
``0`` = nothing in common).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ranklit._checks import check_flag

__all__ = [
    "RetrievalInputs",
    "prepare_inputs",
    "levels_between",
    "excluded_pairs",
    "compute_dtype",
    "check_embeddings",
    "check_labels",
    "check_ids",
    "check_distinct_ids",
]


@dataclass(frozen=True)
class RetrievalInputs:
    """Validated queries and retrieval set, in the computation dtype.

    Attributes:
        queries: ``[Q, D]`` query embeddings.
        query_labels: ``[Q, L]`` integer labels, column 0 finest.
        refs: ``[N, D]`` retrieval-set embeddings.
        ref_labels: ``[N, L]`` integer labels.
        query_ids: ``[Q]`` ids used to exclude an item from its own query's ranking, or ``None`` (nothing excluded).
        ref_ids: ``[N]`` ids of the retrieval set, or ``None``.
    """

    queries: Tensor
    query_labels: Tensor
    refs: Tensor
    ref_labels: Tensor
    query_ids: Tensor | None
    ref_ids: Tensor | None

    @property
    def num_levels(self) -> int:
        """Number of label columns ``L``."""
        return int(self.query_labels.shape[1])

    def self_pairs(self) -> Tensor | None:
        """``[Q, N]`` bool mask of the pairs whose item is the query itself (same id), or ``None``."""
        return excluded_pairs(self.query_ids, self.ref_ids, self.refs.shape[0])


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype computations run in: float64 stays float64, anything narrower is accumulated in float32.

    >>> compute_dtype(torch.bfloat16), compute_dtype(torch.float64)
    (torch.float32, torch.float64)
    """
    return torch.float64 if dtype == torch.float64 else torch.float32


def check_labels(labels: Tensor, num_rows: int, name: str = "labels") -> Tensor:
    """``labels`` as a ``[N, L]`` int64 matrix; ``TypeError``/``ValueError`` naming ``name`` otherwise.

    Float, complex and bool labels are refused (a float label is never silently cast to an integer).

    >>> check_labels(torch.tensor([3, 4]), 2).tolist()
    [[3], [4]]
    >>> check_labels(torch.tensor([0.0, 1.0]), 2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: `labels` must hold integer class ids, got dtype torch.float32. Pass e.g. `labels.long()` ...
    """
    if not isinstance(labels, Tensor):
        raise TypeError(f"`{name}` must be a torch.Tensor of integer labels, got {type(labels).__name__}.")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise TypeError(
            f"`{name}` must hold integer class ids, got dtype {labels.dtype}. Pass e.g. `{name}.long()` if the values "
            "are whole numbers."
        )
    if labels.ndim == 1:
        labels = labels[:, None]
    if labels.ndim != 2 or labels.shape[1] == 0:
        raise ValueError(
            f"`{name}` must have shape [N] or [N, L] (column 0 = finest level), got {tuple(labels.shape)}."
        )
    if labels.shape[0] != num_rows:
        raise ValueError(
            f"`{name}` has {labels.shape[0]} rows but the embeddings have {num_rows}: give one label row per embedding."
        )
    return labels.long()


def check_embeddings(embeddings: Tensor, name: str = "embeddings", finite: bool = True) -> None:
    """Raise ``TypeError``/``ValueError`` naming ``name`` unless ``embeddings`` is a finite, non-empty float ``[N, D]``.

    ``finite=False`` skips the finiteness check (a device synchronisation), for per-batch checks of a metric.

    >>> check_embeddings(torch.zeros(2, 3, dtype=torch.long))
    Traceback (most recent call last):
    ...
    TypeError: `embeddings` must be a floating-point torch.Tensor of shape [N, D], got a torch.int64 tensor.
    """
    if not isinstance(embeddings, Tensor) or not embeddings.is_floating_point():
        got = f"a {embeddings.dtype} tensor" if isinstance(embeddings, Tensor) else type(embeddings).__name__
        raise TypeError(f"`{name}` must be a floating-point torch.Tensor of shape [N, D], got {got}.")
    if embeddings.ndim != 2:
        raise ValueError(f"`{name}` must have shape [N, D], got {tuple(embeddings.shape)}.")
    if embeddings.shape[0] == 0:
        raise ValueError(f"`{name}` is empty: a retrieval problem needs at least one item.")
    if embeddings.shape[1] == 0:
        raise ValueError(f"`{name}` has shape {tuple(embeddings.shape)}: embeddings of size 0 score every pair alike; "
                         "check the network's output size (`embedding_dim`).")
    if finite and not torch.isfinite(embeddings.detach()).all():
        raise ValueError(f"`{name}` contains NaN or infinite values; check the network's output and the learning rate.")


def check_ids(ids: Tensor | None, num_rows: int, name: str = "ids") -> Tensor | None:
    """``ids`` as ``[N]`` int64 (``None`` stays ``None``); integer sample ids, one per embedding.

    >>> check_ids(torch.tensor([4, 5]), 2).tolist()
    [4, 5]
    """
    if ids is None:
        return None
    if not isinstance(ids, Tensor) or ids.ndim != 1 or ids.shape[0] != num_rows:
        shape = tuple(ids.shape) if isinstance(ids, Tensor) else type(ids).__name__
        raise ValueError(f"`{name}` must be a 1-D tensor with one id per embedding ({num_rows}), got {shape}.")
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"`{name}` must hold integer sample ids (the dataset index), got dtype {ids.dtype}.")
    return ids.long()


def check_distinct_ids(ids: Tensor, name: str = "ids") -> None:
    """Raise ``ValueError`` when more than one item was given and all share one id.

    An item is removed from a query's ranking when their ids are equal, so identical ids leave nothing to rank: they
    are almost always labels or a constant passed where sample ids (the dataset index) were meant.

    >>> check_distinct_ids(torch.tensor([3, 3, 3]))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: `ids` are all equal (3, for 3 items): ids must identify the samples (e.g. the dataset index), ...
    """
    if ids.numel() > 1 and bool((ids == ids[0]).all()):
        raise ValueError(
            f"`{name}` are all equal ({int(ids[0])}, for {ids.numel()} items): ids must identify the samples (e.g. the "
            "dataset index), since an item is removed from the ranking of every query with its id."
        )


def check_hierarchy(
    labels: Tensor, name: str = "labels", class_names: Sequence[Sequence[object]] | None = None
) -> None:
    """Raise ``ValueError`` if two rows share a label at column ``h`` but differ at a coarser column ``h + 1``.

    ``class_names``: per column, the original label of each id (a dataset's ``class_names``, e.g. a CSV's values
    before they were relabelled ``0..C-1``); the message then names the labels as the user wrote them.

    >>> check_hierarchy(torch.tensor([[0, 0], [1, 0], [2, 1]]))
    >>> check_hierarchy(torch.tensor([[0, 0], [0, 1]]), class_names=[["sparrow"], ["bird", "plane"]])
    Traceback (most recent call last):
    ...
    ValueError: `labels` is not a consistent hierarchy: label 'sparrow' at column 0 has 2 different parents ...
    """
    for h in range(labels.shape[1] - 1):
        pairs = torch.unique(labels[:, h : h + 2], dim=0)
        children, counts = torch.unique(pairs[:, 0], return_counts=True)
        if (counts > 1).any():
            bad = int(children[counts > 1][0])
            parents = [int(p) for p in pairs[pairs[:, 0] == bad, 1]]
            shown = _shown(class_names, h, [bad]) + _shown(class_names, h + 1, parents)
            raise ValueError(
                f"`{name}` is not a consistent hierarchy: label {shown[0]} at column {h} has "
                f"{len(parents)} different parents at column {h + 1} ({', '.join(shown[1:4])}"
                f"{', ...' if len(parents) > 3 else ''}) (column 0 must be the finest level, and each fine label must "
                "belong to one coarser label)."
            )


def _shown(class_names: Sequence[Sequence[object]] | None, column: int, ids: list[int]) -> list[str]:
    """The labels ``ids`` of ``column`` as the user wrote them (``class_names``) where known, else the ids."""
    names = class_names[column] if class_names is not None and column < len(class_names) else ()
    return [repr(names[i]) if i < len(names) else str(i) for i in ids]


def prepare_inputs(
    embeddings: Tensor,
    labels: Tensor,
    *,
    ref_embeddings: Tensor | None = None,
    ref_labels: Tensor | None = None,
    ids: Tensor | None = None,
    ref_ids: Tensor | None = None,
    normalize: bool = True,
) -> RetrievalInputs:
    """Validate a retrieval problem, bring it to the computation dtype (see :func:`compute_dtype`) and, by default,
    L2-normalise the embeddings (``x / max(|x|, 1e-12)``, differentiable, so gradients flow through it).

    Without ``ref_embeddings`` the batch is its own retrieval set and each query is excluded by position (ids default
    to ``arange(B)``). With ``ref_embeddings``, ``ids`` and ``ref_ids`` are given together or not at all.
    ``normalize=False`` keeps the embeddings as given (scores are raw dot products).

    >>> x = prepare_inputs(torch.randn(4, 3), torch.tensor([0, 0, 1, 1]))
    >>> x.queries.shape, x.query_labels.shape, x.query_ids.tolist()
    (torch.Size([4, 3]), torch.Size([4, 1]), [0, 1, 2, 3])
    """
    check_flag("normalize", normalize)
    check_embeddings(embeddings, "embeddings")
    labels = check_labels(labels, embeddings.shape[0], "labels")
    ids = check_ids(ids, embeddings.shape[0], "ids")
    if ref_embeddings is None:
        if ref_labels is not None or ref_ids is not None:
            raise ValueError("`ref_labels`/`ref_ids` were given without `ref_embeddings`; pass all of them or none.")
        ref_embeddings, ref_labels = embeddings, labels
        if ids is None:
            ids = torch.arange(embeddings.shape[0], device=embeddings.device)
        ref_ids = ids
    else:
        if ref_labels is None:
            raise ValueError("`ref_embeddings` was given without `ref_labels`; pass the labels of the retrieval set.")
        check_embeddings(ref_embeddings, "ref_embeddings")
        ref_labels = check_labels(ref_labels, ref_embeddings.shape[0], "ref_labels")
        ref_ids = check_ids(ref_ids, ref_embeddings.shape[0], "ref_ids")
        if (ids is None) != (ref_ids is None):
            raise ValueError(
                "`ids` and `ref_ids` must be given together: items are excluded from a query's ranking when their "
                "id equals the query's id."
            )
        if ref_embeddings.shape[1] != embeddings.shape[1]:
            raise ValueError(
                f"`ref_embeddings` has dimension {ref_embeddings.shape[1]} but `embeddings` has {embeddings.shape[1]}."
            )
        if ref_labels.shape[1] != labels.shape[1]:
            raise ValueError(
                f"`ref_labels` has {ref_labels.shape[1]} label columns but `labels` has {labels.shape[1]}."
            )
    dtype = compute_dtype(embeddings.dtype)
    queries = _prepare(embeddings, dtype, normalize)
    refs = queries if ref_embeddings is embeddings else _prepare(ref_embeddings, dtype, normalize)
    return RetrievalInputs(
        queries=queries,
        query_labels=labels,
        refs=refs,
        ref_labels=ref_labels,
        query_ids=ids,
        ref_ids=ref_ids,
    )


def _prepare(embeddings: Tensor, dtype: torch.dtype, normalize: bool) -> Tensor:
    embeddings = embeddings.to(dtype)
    return torch.nn.functional.normalize(embeddings, dim=1) if normalize else embeddings


def levels_between(query_labels: Tensor, ref_labels: Tensor) -> Tensor:
    """Level of every (query, item) pair: the number of label columns, from the coarsest, on which they agree.

    Args:
        query_labels: ``[Q, L]``.
        ref_labels: ``[N, L]``, or ``[Q, N, L]`` for items chosen per query.

    Returns:
        ``[Q, N]`` int64 in ``0..L``.

    >>> levels_between(torch.tensor([[0, 0]]), torch.tensor([[0, 0], [1, 0], [2, 1]])).tolist()
    [[2, 1, 0]]
    """
    agree = query_labels[:, None, :] == (ref_labels if ref_labels.ndim == 3 else ref_labels[None, :, :])
    return agree.flip(-1).cumprod(-1).sum(-1)


def excluded_pairs(query_ids: Tensor | None, ref_ids: Tensor | None, num_refs: int) -> Tensor | None:
    """``[Q, N]`` boolean mask of the pairs removed from the ranking (item id equals query id), or ``None``.

    >>> excluded_pairs(torch.tensor([1, 2]), torch.tensor([0, 1, 2]), 3).tolist()
    [[False, True, False], [False, False, True]]
    """
    if query_ids is None or ref_ids is None:
        return None
    return query_ids[:, None] == ref_ids[None, :]
