"""The smooth-rank sums ``rank`` and ``hrank`` of every ranked item, by the Triton kernels, with their gradient.

:func:`rank_sums` is the ``"triton"`` engine of :mod:`ranklit.functional._kernels._rank_engine`: for each query ``q``
and
ranked item ``k = index[q, p]`` it returns (see :mod:`ranklit.functional._kernels._rank_sum_kernels` for the formulas)::

    rank[q, p]  = 1   + sum_{j in Omega_q, j != k} R(s_j - s_k)
    hrank[q, p] = w_k + sum_{j in Omega_q, j != k} min(w_k, w_j) Hh(s_j - s_k)

The losses finish in torch, with autograd, exactly as the torch engine does: Smooth-AP ``mean_p hrank / rank``
(``R = Hh = sig``); SupAP the same with ``R = H^-`` on the negatives, ``H`` elsewhere, and ``Hh = H``; H-AP
``sum_p hrank / rank / sum_p w_k`` with the relevances ``w``. The gradient of ``scores`` is the backward kernel's.

Agreement with the torch engine: float32 round-off (the sums run in another order), tested at ``rtol = 1e-4`` and
``atol = 1e-5`` on the loss and ``1e-4 * max |grad|`` on each gradient; in float64 at ``1e-10``. The row sums of the
gradient are gathered with atomic additions, so two runs may differ in the last bits. No double backward.

Cost: time ``O(Q P N)``; memory ``O(Q N)`` bytes for the int8 codes and ``O(Q P)`` for the sums: the ``[Q, P, N]``
differences are never written.

**When a launch raises** (forward or backward): ``on_error`` gets the error (it raises, or records the failure and
warns: :mod:`ranklit.functional._kernels._guard`), then torch recomputes that call
(:mod:`ranklit.functional._kernels._rank_sums_torch`): the forward's sums, or the backward's gradient from the saved
inputs (no
forward graph is needed: the torch path recomputes each chunk's sums under autograd). With ``kernels=False`` torch
computes both, through the same function.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from ranklit.functional._kernels._guard import kernel_device
from ranklit.functional._kernels._rank_sum_kernels import rank_sum_kernels
from ranklit.functional._kernels._rank_sums_torch import torch_rank_sums, torch_rank_sums_grad

__all__ = ["RankSteps", "rank_sums"]

_BLOCK_ITEMS = 128  # BN: items per tile
_BLOCK_RANKED = 16  # BP: most ranked items per tile (fewer when a query has fewer)


@dataclass(frozen=True)
class RankSteps:
    """Which steps the kernels use and their parameters (validated by the losses' options before).

    ``smooth=True``: Smooth-AP (``sig`` everywhere); ``False``: the bounds of SupAP and H-AP.
    """

    smooth: bool
    tau: float
    rho: float = 100.0
    delta: float = 0.05
    offset: float | None = None
    start: float = 0.5
    leak: float = 10.0
    beta: float = 25.0
    gamma: float = 0.5
    with_hrank: bool = False

    def parameters(self, like: Tensor) -> Tensor:
        """``[tau, rho, delta, offset, start, leak, beta, gamma]`` in ``like``'s dtype, on its device; the offset
        ``None`` computed as :func:`ranklit.functional.ranking.supap_upper_step` does."""
        delta_over_tau = torch.tensor(self.delta / self.tau, dtype=like.dtype)
        offset = float(torch.sigmoid(delta_over_tau)) + self.start if self.offset is None else self.offset
        values = [self.tau, self.rho, self.delta, offset, self.start, self.leak, self.beta, self.gamma]
        return torch.tensor(values, dtype=like.dtype, device=like.device)


def _reraise(error: BaseException) -> None:
    raise error


def rank_sums(
    scores: Tensor, codes: Tensor, weights: Tensor | None, index: Tensor, ranked: Tensor, steps: RankSteps, *,
    kernels: bool = True, on_error: Callable[[BaseException], None] = _reraise,
) -> tuple[Tensor, Tensor]:
    """``(rank, hrank)``, both ``[Q, P]`` (1 and 0 at padding), differentiable with respect to ``scores``.

    Args:
        scores: ``[Q, N]`` float32 or float64 scores (CUDA, or CPU for Triton's interpreter; a non-contiguous
            matrix is copied first: the kernels' offsets assume unit column strides).
        codes: ``[Q, N]`` integer level of each item, ``-1`` where it is not in the query's ranking.
        weights: ``[Q, N]`` relevances in the scores' dtype (H-AP), or ``None``: ``w_j = [level_j >= 1]``.
        index: ``[Q, P]`` columns of the ranked items (:func:`ranklit.functional.ranking.select_columns`).
        ranked: ``[Q, P]`` bool, the real entries of ``index``.
        steps: the step functions and their parameters.
        kernels: launch the kernels (``False``: the torch path, :mod:`ranklit.functional._kernels._rank_sums_torch`).
        on_error: called with what a launch raises (default: raise it); if it returns, torch recomputes the call.
    """
    idx = torch.where(ranked, index, torch.full_like(index, -1)).to(torch.int32).contiguous()
    codes = codes.to(torch.int8).contiguous()
    weights = None if weights is None else weights.to(scores.dtype).contiguous()
    output: tuple[Tensor, Tensor] = _uncompiled_apply()(scores.contiguous(), codes, weights, idx, steps, kernels,
                                                               on_error)
    return output


@functools.cache
def _uncompiled_apply() -> Any:
    """``_RankSums.apply`` out of ``torch.compile``'s reach (a compiled loss, ``model.compile_loss``, calls the kernels
    as they are); built on first use, as ``torch.compiler.disable`` imports the compiler."""
    return torch.compiler.disable(_RankSums.apply)


class _RankSums(torch.autograd.Function):
    """``(scores, codes, weights, idx, steps, kernels, on_error) -> (rank, hrank)``: the forward kernel, and the
    backward kernel that recomputes each tile; torch where ``kernels`` is ``False`` or a launch raised."""

    @staticmethod
    def forward(
        ctx: Any, scores: Tensor, codes: Tensor, weights: Tensor | None, idx: Tensor, steps: RankSteps,
        kernels: bool, on_error: Callable[[BaseException], None],
    ) -> tuple[Tensor, Tensor]:
        num_queries, num_ranked = idx.shape
        rank = torch.ones(num_queries, num_ranked, dtype=scores.dtype, device=scores.device)
        hrank = torch.zeros_like(rank)
        options = _launch_options(steps, num_ranked)
        params = steps.parameters(scores)
        grid = (num_queries, _cdiv(num_ranked, options["BP"]))
        if kernels and num_queries and num_ranked:
            try:
                with kernel_device(scores.device):
                    rank_sum_kernels().forward[grid](scores, codes, _or(weights, scores), idx, params, rank, hrank,
                                                     scores.shape[1], num_ranked, HAS_WEIGHTS=weights is not None,
                                                     num_warps=num_warps(scores.dtype), **options)
            except Exception as error:  # a compile or launch error: on_error raises, or torch recomputes the call
                on_error(error)
                kernels = False
        if not kernels:
            rank, hrank = torch_rank_sums(scores, codes, weights, idx, steps)
        ctx.save_for_backward(scores, codes, weights, idx, params)
        ctx.steps, ctx.kernels, ctx.on_error = steps, kernels, on_error
        return rank, hrank

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g_rank: Tensor | None, g_hrank: Tensor | None) -> tuple[Tensor | None, ...]:
        scores, codes, weights, idx, params = ctx.saved_tensors
        num_queries, num_ranked = idx.shape
        g_rank = torch.zeros_like(idx, dtype=scores.dtype) if g_rank is None else g_rank.contiguous()
        g_hrank = torch.zeros_like(g_rank) if g_hrank is None else g_hrank.contiguous()
        grad = torch.zeros(scores.shape, dtype=scores.dtype, device=scores.device)
        rows = torch.zeros_like(g_rank)
        options = _launch_options(ctx.steps, num_ranked)
        grid = (num_queries, _cdiv(scores.shape[1], options["BN"]))
        if ctx.kernels and num_queries and num_ranked and scores.shape[1]:
            try:
                with kernel_device(scores.device):
                    rank_sum_kernels().backward[grid](scores, codes, _or(weights, scores), idx, params, g_rank,
                                                      g_hrank, grad, rows, scores.shape[1], num_ranked,
                                                      HAS_WEIGHTS=weights is not None,
                                                      num_warps=num_warps(scores.dtype), **options)
            except Exception as error:  # the gradient recomputed by torch from the saved inputs
                ctx.on_error(error)
                ctx.kernels = False
        if not ctx.kernels:
            grad = torch_rank_sums_grad(scores, codes, weights, idx, ctx.steps, g_rank, g_hrank)
            return grad, None, None, None, None, None, None
        grad.scatter_add_(1, idx.clamp(min=0).long(), -rows)  # rows is 0 at padding
        return grad, None, None, None, None, None, None


def _or(weights: Tensor | None, scores: Tensor) -> Tensor:
    """A pointer for the kernels' ``w_ptr`` (never read without weights)."""
    return scores if weights is None else weights


def _launch_options(steps: RankSteps, num_ranked: int) -> dict[str, Any]:
    """The kernels' compile-time options: steps and block sizes."""
    return {
        "STEPS": 0 if steps.smooth else 1,
        "WITH_HRANK": steps.with_hrank,
        "BP": min(_BLOCK_RANKED, _next_power_of_2(num_ranked)),
        "BN": _BLOCK_ITEMS,
    }


def num_warps(dtype: torch.dtype) -> int:
    """Warps per program: 8 for float64, 4 for float32. Compiled ahead of time for sm_70 .. sm_90
    (``benchmarks/ptxas_counts.py``, counts in ``benchmarks/RESULTS.md``): at 4 warps the float64 backward kernel
    spills (255 registers, 72 to 232 bytes) on every architecture, at 8 it holds 182-212 registers without spills;
    float32 needs at most 149 at 4 warps (8 warps spill on sm_90). Not timed on a GPU yet.

    >>> num_warps(torch.float64), num_warps(torch.float32)
    (8, 4)
    """
    return 8 if dtype == torch.float64 else 4


def _cdiv(value: int, block: int) -> int:
    """``ceil(value / block)``.

    >>> _cdiv(10, 4)
    3
    """
    return -(-value // block)


def _next_power_of_2(value: int) -> int:
    """The smallest power of 2 ``>= value`` (1 for 0).

    >>> _next_power_of_2(3), _next_power_of_2(16)
    (4, 16)
    """
    return 1 << max(0, value - 1).bit_length()
