"""The smooth-rank sums computed by torch, as the Triton kernels compute them: their self-check and their fallback.

The formula of :mod:`ranklit.functional._kernels._rank_sum_kernels` with the torch engine's step functions
(:mod:`ranklit.functional.ranking`): for a query ``q`` and a ranked item ``k = idx[q, p]`` (``-1``: padding),
``rank = 1 + sum_j c_kj R(s_j - s_k)`` and ``hrank = w_k + sum_j c_kj min(w_k, w_j) Hh(s_j - s_k)``. Chunk by chunk of
queries (``[chunk, P, N]`` intermediates, sized as the torch engine's), so a fallback at a size the kernels handled
stays within the torch engine's memory.

:func:`torch_rank_sums_grad` is the gradient of ``<g_rank, rank> + <g_hrank, hrank>``: each chunk's sums recomputed
under autograd and differentiated at once (the backward kernel's contract), so a backward that falls back needs no
graph of the forward.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import torch
from torch import Tensor

from ranklit.functional.ranking import (
    default_chunk_size,
    heaviside,
    linear_lower_step,
    selected_differences,
    sigmoid_step,
    supap_upper_step,
)

__all__ = ["torch_rank_sums", "torch_rank_sums_grad"]


class Steps(Protocol):
    """The steps' parameters, read only (:class:`ranklit.functional._kernels._rank_sums.RankSteps`, which imports this
    module)."""

    @property
    def smooth(self) -> bool: ...

    @property
    def tau(self) -> float: ...

    @property
    def rho(self) -> float: ...

    @property
    def delta(self) -> float: ...

    @property
    def offset(self) -> float | None: ...

    @property
    def start(self) -> float: ...

    @property
    def leak(self) -> float: ...

    @property
    def beta(self) -> float: ...

    @property
    def gamma(self) -> float: ...

    @property
    def with_hrank(self) -> bool: ...


_INTERMEDIATES = 6  # [chunk, P, N] tensors alive at once in a chunk's sums (and their gradient)


def torch_rank_sums(
    scores: Tensor, codes: Tensor, weights: Tensor | None, idx: Tensor, steps: Steps
) -> tuple[Tensor, Tensor]:
    """``(rank, hrank)``, both ``[Q, P]`` (1 and 0 at padding), without gradient: what the forward kernel writes.

    Args as :func:`ranklit.functional._kernels._rank_sums.rank_sums` after its conversions: ``idx`` ``[Q, P]`` int32
    columns of the ranked items, ``-1`` at padding.
    """
    with torch.no_grad():
        parts = [_chunk_sums(scores[rows], codes[rows], _rows(weights, rows), idx[rows], steps)
                 for rows in _chunks(idx, scores.shape[1])]
    if not parts:
        return scores.new_ones(idx.shape), scores.new_zeros(idx.shape)
    return torch.cat([rank for rank, _ in parts]), torch.cat([hrank for _, hrank in parts])


def torch_rank_sums_grad(
    scores: Tensor, codes: Tensor, weights: Tensor | None, idx: Tensor, steps: Steps, g_rank: Tensor,
    g_hrank: Tensor,
) -> Tensor:
    """``[Q, N]`` gradient of ``sum(g_rank * rank) + sum(g_hrank * hrank)`` with respect to ``scores``."""
    grad = torch.zeros_like(scores)
    for rows in _chunks(idx, scores.shape[1]):
        with torch.enable_grad():
            leaf = scores[rows].detach().requires_grad_()
            rank, hrank = _chunk_sums(leaf, codes[rows], _rows(weights, rows), idx[rows], steps)
            total = (rank * g_rank[rows]).sum() + (hrank * g_hrank[rows]).sum()
            (part,) = torch.autograd.grad(total, leaf, allow_unused=True)
        if part is not None:  # None: only exact steps, which carry no gradient
            grad[rows] = part
    return grad


def _rows(weights: Tensor | None, rows: slice) -> Tensor | None:
    return None if weights is None else weights[rows]


def _chunks(idx: Tensor, num_items: int) -> Iterator[slice]:
    num_queries, num_ranked = idx.shape
    size = default_chunk_size(num_queries, _INTERMEDIATES * num_ranked, num_items)
    for start in range(0, num_queries, size):
        yield slice(start, start + size)


def _chunk_sums(
    scores: Tensor, codes: Tensor, weights: Tensor | None, idx: Tensor, steps: Steps
) -> tuple[Tensor, Tensor]:
    """The sums of a chunk of queries; every intermediate is ``[C, P, N]``."""
    ranked = idx >= 0
    index = idx.clamp(min=0).long()
    diff = selected_differences(scores, index)
    levels = codes.long()
    level_k, level_j = levels.gather(1, index)[:, :, None], levels[:, None, :]
    columns = torch.arange(scores.shape[1], device=scores.device)
    counted = ranked[:, :, None] & (level_j >= 0) & (columns[None, None, :] != index[:, :, None])
    w = (levels >= 1).to(scores.dtype) if weights is None else weights
    w_k = w.gather(1, index)
    if steps.smooth:
        rank_step = hrank_step = sigmoid_step(diff, steps.tau)
    else:
        exact = heaviside(diff.detach())
        upper = supap_upper_step(diff, steps.tau, steps.rho, steps.delta, steps.offset, steps.start)
        rank_step = torch.where(level_j < level_k, upper, exact)
        hrank_step = exact
        if steps.with_hrank:
            lower = linear_lower_step(diff, steps.leak, steps.beta, steps.gamma)
            hrank_step = torch.where(level_j > level_k, lower, exact)
    zero = torch.zeros_like(diff)
    rank = 1.0 + torch.where(counted, rank_step, zero).sum(-1)
    weight = torch.minimum(w_k[:, :, None], w[:, None, :])
    hrank = w_k + torch.where(counted, weight * hrank_step, zero).sum(-1)
    return torch.where(ranked, rank, torch.ones_like(rank)), torch.where(ranked, hrank, torch.zeros_like(hrank))
