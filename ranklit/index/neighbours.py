"""Scores and nearest neighbours of queries against a descriptor set, streamed chunk by chunk over the set.

Memory is that of the result (``[Q, N]`` scores, or ``[Q, k]`` neighbours) plus one chunk of the set's descriptors,
whatever the size of the set (:mod:`ranklit.index.descriptors`: a tensor or shards on disk).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ranklit.index.descriptors import DEFAULT_CHUNK_ROWS, Descriptors, as_descriptors

__all__ = ["query_scores", "top_k"]


def query_scores(queries: Tensor, gallery: Tensor | Descriptors, *, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Tensor:
    """``[Q, N]`` dot products of the queries with every gallery row, computed ``chunk_rows`` gallery rows at a time.

    Memory: ``Q·N`` scores plus one chunk, whatever the size of the gallery's descriptors.

    Example:
        >>> query_scores(torch.tensor([[1.0, 0.0]]), torch.tensor([[0.5, 0.5], [0.0, 1.0]]), chunk_rows=1)
        tensor([[0.5000, 0.0000]])
    """
    chunks = as_descriptors(gallery).chunks(chunk_rows)
    parts = [queries @ chunk.to(queries.device, queries.dtype).T for chunk in chunks]
    return torch.cat(parts, dim=1) if parts else queries.new_zeros(queries.shape[0], 0)


def top_k(
    queries: Tensor,
    gallery: Tensor | Descriptors,
    k: int,
    *,
    exclude: Tensor | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> tuple[Tensor, Tensor]:
    """The ``k`` highest-scoring gallery rows of each query, streamed over the gallery.

    Args:
        queries: ``[Q, D]``.
        gallery: ``[N, D]`` tensor or descriptor set.
        k: neighbours kept (``min(k, N)`` when the gallery is smaller; ``N - 1`` with ``exclude``).
        exclude: ``[Q]`` gallery row each query must not return (itself, for database-side augmentation).
        chunk_rows: gallery rows scored at a time.

    Returns:
        ``(scores, index)``, both ``[Q, k']``, in decreasing order of score (memory ``O(Q·(k + chunk_rows))``).

    Example:
        >>> top_k(torch.tensor([[1.0, 0.0]]), torch.tensor([[0.5, 0.5], [1.0, 0.0], [0.0, 1.0]]), 2)[1]
        tensor([[1, 0]])
    """
    best_scores = queries.new_full((queries.shape[0], 0), float("-inf"))
    best_index = torch.zeros(queries.shape[0], 0, dtype=torch.long, device=queries.device)
    start = 0
    for chunk in as_descriptors(gallery).chunks(chunk_rows):
        scores = queries @ chunk.to(queries.device, queries.dtype).T
        columns = torch.arange(start, start + chunk.shape[0], device=queries.device)
        if exclude is not None:
            scores = scores.masked_fill(columns[None, :] == exclude[:, None].to(queries.device), float("-inf"))
        merged_scores = torch.cat([best_scores, scores], dim=1)
        merged_index = torch.cat([best_index, columns.expand(queries.shape[0], -1)], dim=1)
        best_scores, position = merged_scores.topk(min(k, merged_scores.shape[1]), dim=1)
        best_index = merged_index.gather(1, position)
        start += chunk.shape[0]
    if exclude is not None and best_scores.shape[1] == start and start > 0:  # only when k >= N: the row itself
        best_scores, best_index = best_scores[:, :-1], best_index[:, :-1]
    return best_scores, best_index
