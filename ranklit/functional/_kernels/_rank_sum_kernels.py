"""The Triton kernels of the smooth-rank sums, forward and backward, built on first use (:func:`rank_sum_kernels`).

For a query ``q``, a ranked item ``k`` (``index[q, p]``) and every item ``j`` of its retrieval set, with
``d = s_j - s_k``, ``c_kj`` = "``j`` is in the ranking and ``j != k``" and the int8 ``code`` = level (``-1``: not in
the ranking)::

    rank(k)  = 1   + sum_j c_kj R(d)                    R = sig (STEPS 0), or H^- if l_j < l_k else H (STEPS 1)
    hrank(k) = w_k + sum_j c_kj min(w_k, w_j) Hh(d)     Hh = sig (STEPS 0), or H_lb if with_hrank and l_j > l_k
                                                        else H (STEPS 1)

with ``w`` the relevances (H-AP) or ``w_j = [l_j >= 1]`` (binary losses). The forward kernel runs one program per
(query, block of ``BP`` ranked items) and loops over the items in blocks of ``BN``, the sums in registers; the backward
kernel runs one program per (query, block of ``BN`` items), loops over the ranked items, recomputes each ``[BP, BN]``
tile's derivatives ``a_kj = c_kj (g_rank R'(d) + g_hrank min(w_k, w_j) Hh'(d))`` and adds ``sum_k a_kj`` to
``grad[q, j]`` and ``sum_j a_kj`` to ``grad_rows[q, p]`` (atomically: the row sums of a query gather from all its
programs). Nothing of size ``Q x P x N`` is ever written.

Why undecorated functions and a factory: this module must import where Triton does not (pytest's
``--doctest-modules`` imports every module), so it decorates nothing; :func:`rank_sum_kernels` decorates copies of
the functions below on first use, in a namespace of their own where the kernels find their helpers by name. They are
compiled, or run by Triton's interpreter on CPU tensors when ``TRITON_INTERPRET=1`` was set before Triton was
imported (Triton reads it when it decorates, its own library functions included): ``tests/conftest.py`` sets it on
machines without a CUDA device, so the CPU suite runs every kernel.
"""

from __future__ import annotations

import functools
import types
from types import SimpleNamespace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import triton.language as tl

__all__ = ["rank_sum_kernels"]


@functools.cache
def rank_sum_kernels() -> SimpleNamespace:
    """The kernels ``forward`` and ``backward`` (run by Triton's interpreter under ``TRITON_INTERPRET=1``)."""
    import triton
    import triton.language

    namespace = {"tl": triton.language}
    interpreting = triton.knobs.runtime.interpret
    for fn in (_items, _steps, _forward, _backward):  # helpers first: a kernel's copy finds them in the namespace
        copy = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, fn.__closure__)
        copy.__annotations__, copy.__module__, copy.__qualname__ = fn.__annotations__, fn.__module__, fn.__name__
        helper = fn in (_items, _steps)
        # the interpreter runs a kernel as Python: its helpers run as plain functions (a jitted helper would re-patch
        # triton.language at every call, 10x slower); compiled kernels need jitted helpers
        namespace[fn.__name__] = copy if helper and interpreting else triton.jit(copy)
    return SimpleNamespace(forward=namespace["_forward"], backward=namespace["_backward"])


def _items(s_ptr, code_ptr, w_ptr, q, cols, ok, N, HAS_WEIGHTS: tl.constexpr):
    """Scores, codes and weights of the columns ``cols`` of row ``q`` (where ``ok``; every ``[Q, N]`` contiguous)."""
    s = tl.load(s_ptr + q * N + cols, mask=ok, other=0.0)
    level = tl.load(code_ptr + q * N + cols, mask=ok, other=-1)
    if HAS_WEIGHTS:
        w = tl.load(w_ptr + q * N + cols, mask=ok, other=0.0)
    else:
        w = (level >= 1).to(s.dtype)
    return s, level, w


def _steps(d, l_k, l_j, par_ptr, STEPS: tl.constexpr, WITH_HRANK: tl.constexpr, DERIV: tl.constexpr):
    """``(R, Hh)`` of a ``[BP, BN]`` tile of differences, or their derivatives when ``DERIV``."""
    inv_tau = 1.0 / tl.load(par_ptr + 0)  # a product per term, not a division (as torch's CUDA division by a scalar)
    x = d * inv_tau
    sig = 1.0 / (1.0 + tl.exp(-tl.minimum(tl.maximum(x, -50.0), 50.0)))
    if DERIV:  # torch's clamp passes no gradient at its bounds: hence the strict inequalities
        smooth = tl.where((x > -50.0) & (x < 50.0), sig * (1.0 - sig) * inv_tau, 0.0)
    else:
        smooth = sig
    if STEPS == 0:
        rank_step = smooth
        hrank_step = smooth
    else:
        rho, delta, off = tl.load(par_ptr + 1), tl.load(par_ptr + 2), tl.load(par_ptr + 3)
        start, leak = tl.load(par_ptr + 4), tl.load(par_ptr + 5)
        beta, gamma = tl.load(par_ptr + 6), tl.load(par_ptr + 7)
        if DERIV:
            exact = tl.zeros_like(d)
            upper = tl.where(d <= delta, smooth, rho)
            lower = tl.where(d <= 0.0, leak, tl.where(beta * d + gamma < 1.0, beta, 0.0))
        else:
            exact = (d >= 0.0).to(d.dtype)
            upper = tl.where(d <= 0.0, smooth, tl.where(d <= delta, smooth + start, rho * (d - delta) + off))
            lower = tl.where(d <= 0.0, leak * d, tl.minimum(beta * d + gamma, 1.0))
        rank_step = tl.where(l_j < l_k, upper, exact)
        if WITH_HRANK:
            hrank_step = tl.where(l_j > l_k, lower, exact)
        else:
            hrank_step = exact
    return rank_step, hrank_step


def _forward(
    s_ptr, code_ptr, w_ptr, idx_ptr, par_ptr, rank_ptr, hrank_ptr, N, P,
    STEPS: tl.constexpr, WITH_HRANK: tl.constexpr, HAS_WEIGHTS: tl.constexpr,
    BP: tl.constexpr, BN: tl.constexpr,
):
    q = tl.program_id(0).to(tl.int64)
    offs_k = tl.program_id(1) * BP + tl.arange(0, BP)
    idx = tl.load(idx_ptr + q * P + offs_k, mask=offs_k < P, other=-1)
    ranked = idx >= 0
    s_k, l_k, w_k = _items(s_ptr, code_ptr, w_ptr, q, idx, ranked, N, HAS_WEIGHTS)
    rank = tl.zeros([BP], dtype=s_k.dtype)
    hrank = tl.zeros([BP], dtype=s_k.dtype)
    for j0 in range(0, N, BN):
        offs_j = j0 + tl.arange(0, BN)
        s_j, l_j, w_j = _items(s_ptr, code_ptr, w_ptr, q, offs_j, offs_j < N, N, HAS_WEIGHTS)
        d = s_j[None, :] - s_k[:, None]
        rank_step, hrank_step = _steps(d, l_k[:, None], l_j[None, :], par_ptr, STEPS, WITH_HRANK, False)
        counted = (l_j[None, :] >= 0) & (offs_j[None, :] != idx[:, None])
        rank += tl.sum(tl.where(counted, rank_step, 0.0), 1)
        weight = tl.minimum(w_k[:, None], w_j[None, :])
        hrank += tl.sum(tl.where(counted, weight * hrank_step, 0.0), 1)
    tl.store(rank_ptr + q * P + offs_k, 1.0 + rank, mask=ranked)
    tl.store(hrank_ptr + q * P + offs_k, w_k + hrank, mask=ranked)


def _backward(
    s_ptr, code_ptr, w_ptr, idx_ptr, par_ptr, g_rank_ptr, g_hrank_ptr, grad_ptr, rows_ptr, N, P,
    STEPS: tl.constexpr, WITH_HRANK: tl.constexpr, HAS_WEIGHTS: tl.constexpr,
    BP: tl.constexpr, BN: tl.constexpr,
):
    q = tl.program_id(0).to(tl.int64)
    offs_j = tl.program_id(1) * BN + tl.arange(0, BN)
    in_row = offs_j < N
    s_j, l_j, w_j = _items(s_ptr, code_ptr, w_ptr, q, offs_j, in_row, N, HAS_WEIGHTS)
    column = tl.zeros([BN], dtype=s_j.dtype)
    for k0 in range(0, P, BP):
        offs_k = k0 + tl.arange(0, BP)
        idx = tl.load(idx_ptr + q * P + offs_k, mask=offs_k < P, other=-1)
        ranked = idx >= 0
        s_k, l_k, w_k = _items(s_ptr, code_ptr, w_ptr, q, idx, ranked, N, HAS_WEIGHTS)
        g_rank = tl.load(g_rank_ptr + q * P + offs_k, mask=ranked, other=0.0)
        g_hrank = tl.load(g_hrank_ptr + q * P + offs_k, mask=ranked, other=0.0)
        d = s_j[None, :] - s_k[:, None]
        rank_step, hrank_step = _steps(d, l_k[:, None], l_j[None, :], par_ptr, STEPS, WITH_HRANK, True)
        counted = ranked[:, None] & (l_j[None, :] >= 0) & (offs_j[None, :] != idx[:, None])
        weight = tl.minimum(w_k[:, None], w_j[None, :])
        terms = g_rank[:, None] * rank_step + g_hrank[:, None] * weight * hrank_step
        terms = tl.where(counted, terms, 0.0)
        column += tl.sum(terms, 0)
        tl.atomic_add(rows_ptr + q * P + offs_k, tl.sum(terms, 1), mask=ranked)
    tl.store(grad_ptr + q * N + offs_j, column, mask=in_row)
