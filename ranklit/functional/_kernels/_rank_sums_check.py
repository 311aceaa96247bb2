"""The smooth-rank losses' entry to the Triton kernels: the first-use self-check and the fallback to torch.

:func:`checked_rank_sums` is what SupAP, Smooth-AP and the H-AP surrogate call on their Triton engine. Per
``(kernel variant, device, dtype)`` (a variant: Smooth-AP's sigmoid steps, SupAP's bounds, H-AP's bounds with
weights, with or without ``H_lb``; each compiles on its own), :func:`probe_rank_sums` runs first
(:mod:`ranklit.functional._kernels._guard`): the kernels on a small problem, forward and backward, against the torch
path (:mod:`ranklit.functional._kernels._rank_sums_torch`) at the documented tolerances (:data:`TOLERANCES`). The probe
has one item past a tile of ``BN`` items, one ranked item past a block of ``BP``, a query without ranked item, items
outside the ranking and tied scores. It fails, or a later launch raises: one warning, then torch for the rest of the
process (that call included: forward and backward, see :mod:`ranklit.functional._kernels._rank_sums`); ``forced``
(``engine="triton"``): ``KernelError`` instead.

Example (CPU tensors run the kernels only under ``TRITON_INTERPRET=1``):
    >>> from ranklit.functional._kernels._rank_sums import RankSteps
    >>> kernel_name(RankSteps(False, 0.01, with_hrank=True), weighted=True)
    'smooth-rank sums (H-AP bounds with H_lb, weights)'
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from ranklit.functional._kernels import _rank_sums
from ranklit.functional._kernels._guard import kernel_failed, kernel_usable
from ranklit.functional._kernels._rank_sums import RankSteps, rank_sums
from ranklit.functional._kernels._rank_sums_torch import torch_rank_sums, torch_rank_sums_grad
from ranklit.functional.ranking import select_columns

__all__ = ["TOLERANCES", "checked_rank_sums", "kernel_name", "probe_rank_sums"]

TOLERANCES = {torch.float32: 1e-4, torch.float64: 1e-10}
"""Relative tolerance of the kernels' sums against torch's (absolute: a tenth of it, scaled by the largest value on
gradients), as :mod:`ranklit.functional._kernels._rank_sums` states."""


def kernel_name(steps: RankSteps, weighted: bool) -> str:
    """The variant of the kernels ``steps`` and weights compile (the guard's key)."""
    kind = "sigmoid steps" if steps.smooth else "H-AP bounds with H_lb" if steps.with_hrank else (
        "H-AP bounds" if weighted else "SupAP bounds")
    return f"smooth-rank sums ({kind}{', weights' if weighted else ''})"


def checked_rank_sums(
    scores: Tensor, codes: Tensor, weights: Tensor | None, index: Tensor, ranked: Tensor, steps: RankSteps, *,
    forced: bool = False,
) -> tuple[Tensor, Tensor]:
    """:func:`~ranklit.functional._kernels._rank_sums.rank_sums` behind the self-check and with the fallback (module
    docstring): the same results, from the kernels or from torch."""
    name, device, dtype = kernel_name(steps, weights is not None), scores.device, scores.dtype
    probe = functools.partial(probe_rank_sums, steps, weights is not None, device, dtype)
    usable = kernel_usable(name, device, dtype, probe, forced=forced)
    on_error = functools.partial(kernel_failed, name, device, dtype, forced=forced)
    return rank_sums(scores, codes, weights, index, ranked, steps, kernels=usable, on_error=on_error)


def probe_rank_sums(steps: RankSteps, weighted: bool, device: torch.device, dtype: torch.dtype) -> None:
    """Run the kernels on the probe problem, forward and backward; ``AssertionError`` where they differ from torch
    beyond :data:`TOLERANCES` (a compile or launch error propagates)."""
    scores, codes, weights, index, ranked = probe_problem(weighted, device, dtype)
    leaf = scores.clone().requires_grad_()
    rank, hrank = rank_sums(leaf, codes, weights, index, ranked, steps)  # errors propagate: not on_error
    generator = torch.Generator().manual_seed(1)
    g_rank, g_hrank = (torch.randn(rank.shape, generator=generator, dtype=dtype).to(device) for _ in range(2))
    (grad,) = torch.autograd.grad((rank * g_rank).sum() + (hrank * g_hrank).sum(), leaf)
    idx = torch.where(ranked, index, -1).to(torch.int32)
    codes8 = codes.to(torch.int8)
    want = torch_rank_sums(scores, codes8, weights, idx, steps)
    want_grad = torch_rank_sums_grad(scores, codes8, weights, idx, steps, g_rank, g_hrank)
    rtol = TOLERANCES[dtype]
    for got, expected, what in ((rank, want[0], "rank"), (hrank, want[1], "hrank"), (grad, want_grad, "gradient")):
        atol = rtol / 10 * max(1.0, float(expected.abs().max())) if what == "gradient" else rtol / 10
        if not torch.allclose(got.detach(), expected, rtol=rtol, atol=atol):
            error = float((got.detach() - expected).abs().max())
            raise AssertionError(f"the {what} differs from the torch path's by up to {error:.3g} (rtol {rtol:g}, "
                                 f"atol {atol:.3g})")


def probe_problem(
    weighted: bool, device: torch.device, dtype: torch.dtype
) -> tuple[Tensor, Tensor, Tensor | None, Tensor, Tensor]:
    """``(scores, codes, weights, index, ranked)`` of 4 queries over ``BN + 3`` items: query 0 ranks ``BP + 1``
    items (two blocks), query 1 none, query 2 three tied ones, query 3 every item of level >= 1; two items are outside
    every ranking; the scores are multiples of 1/16 (ties), one pair 0.03 apart (inside ``delta``)."""
    num_items, block = _rank_sums._BLOCK_ITEMS + 3, _rank_sums._BLOCK_RANKED
    generator = torch.Generator().manual_seed(0)
    scores = (torch.randn(4, num_items, generator=generator, dtype=torch.float64) * 0.3 * 16).round() / 16
    scores[:, 1] = scores[:, 0] + 0.03
    levels = torch.randint(0, 3 if weighted else 2, (4, num_items), generator=generator)
    levels[0] = 0
    levels[0, : block + 1] = 1 + torch.arange(block + 1) % (2 if weighted else 1)
    levels[1] = 0
    levels[2] = 0
    levels[2, 3:6] = 1
    scores[2, 3:6] = 0.25  # three tied ranked items
    codes = levels.clone()
    codes[:, [2, num_items - 1]] = -1  # outside every ranking
    index, ranked = select_columns(codes >= 1)
    weights = (codes.clamp(min=0).to(dtype) / 2) if weighted else None
    return (scores.to(device=device, dtype=dtype), codes.to(device), None if weights is None else weights.to(device),
            index.to(device), ranked.to(device))
