"""The Triton kernel of the exact metrics' counting: scores computed tile by tile and counted where they are computed.

One kernel, three modes (``MODE``), over the same grid: a program takes ``BLOCK_M`` queries of a chunk and walks the
retrieval set (sorted by the coarsest label, so each query's positives are one contiguous run ``start .. start +
count``) in tiles of ``BLOCK_N`` items; each tile's ``[BLOCK_M, BLOCK_N]`` scores come from ``tl.dot`` over
``BLOCK_K`` slices of the embeddings, in float32 (``input_precision="ieee"``: no TF32), and the removed items (same
id as the query, junk, columns past the end) get ``-inf``, as in the torch path:

* ``MODE = 0``: the tile is stored (``[C, N]`` scores: only for tests, the kernel's scores for the torch path);
* ``MODE = 1``: only the tiles holding the block's positives are visited, and each positive's score is stored in its
  slot ``column - start`` of a ``[C, W]`` buffer;
* ``MODE = 2``: every tile; each score is placed by binary search among its row's thresholds (the positives' scores,
  ascending, ``+inf`` padding to ``2^log_width`` entries) and one is added, atomically, to the histogram bin of the
  first threshold it clears: the cumulative sums of that histogram (outside) are ``#{j : s_j >= t_i}`` (and, with
  ``STRICT``, ``#{j : s_j > t_i}`` from a second search). The ``Q x N`` scores are never written.

A tile's scores are a function of the tile alone (the same loads, the same ``tl.dot`` over the same ``BLOCK_K``
slices in the same order), and modes 1 and 2 compute the same tiles of the same grid, so each positive is counted
against scores computed exactly as its own.

:func:`metric_counts_kernel` decorates the kernel on demand, compiled for CUDA tensors and through Triton's interpreter
for CPU tensors (the tests), whatever ``TRITON_INTERPRET`` said when this module was imported: Triton reads it when
it decorates. So the kernel calls only Triton's builtins (``tl.full``, ``tl.where``, ...), none of the functions
Triton's own library decorated when it was imported (``tl.zeros``, ``tl.sum``, ``tl.max``: compiled-mode objects
the interpreter cannot call); the per-program tile ranges are computed outside instead of by ``tl.min``/``tl.max``.
"""

from __future__ import annotations

import os
from typing import Any

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # importable without Triton (the doctests import every module); the kernel is never launched then
    triton = tl = None

__all__ = ["BLOCK_K", "BLOCK_M", "BLOCK_N", "NUM_WARPS", "launch_config", "launch_config_for", "metric_counts_kernel"]

BLOCK_M, BLOCK_N, BLOCK_K = 32, 64, 32  # a program's queries, a tile's items, the slice of the dimension per tl.dot
# 8 warps: compiled ahead of time (no GPU at hand; benchmarks/ptxas_counts.py, counts in benchmarks/RESULTS.md),
# ptxas gives the counting mode 180-232 registers and no spills on sm_70 .. sm_90 but sm_80 (4 warps: 255 registers
# and spills everywhere); sm_80 takes slices of 16 (8 warps and slices of 32 spill 64 bytes there); not timed yet
NUM_WARPS = 8
MODE_SCORES, MODE_POSITIVES, MODE_COUNTS = 0, 1, 2


def _metric_counts(  # type: ignore[no-untyped-def]  # a Triton kernel: its parameters are typed by Triton
    query_ptr, ref_ptr, query_id_ptr, ref_id_ptr, junk_ptr, start_ptr, count_ptr, tiles_ptr, threshold_ptr, out_ptr,
    num_queries, num_refs, dim, log_width, hist_width,
    stride_query, stride_ref, stride_junk, stride_threshold, stride_out,
    MODE: tl.constexpr, HAS_IDS: tl.constexpr, HAS_JUNK: tl.constexpr, STRICT: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < num_queries
    wide = rows.to(tl.int64)  # row offsets in int64: a chunk's C x N junk flags or C x 2^log_width thresholds pass 2^31
    start = tl.load(start_ptr + rows, mask=row_ok, other=0)
    count = tl.load(count_ptr + rows, mask=row_ok, other=0)
    if HAS_IDS:
        query_ids = tl.load(query_id_ptr + rows, mask=row_ok, other=0)
    first, stop = 0, num_refs
    if MODE == 1:  # the tiles that hold a positive of the block, on the same tile grid as MODE 2 (found outside)
        first = tl.load(tiles_ptr + 2 * tl.program_id(0))
        stop = tl.load(tiles_ptr + 2 * tl.program_id(0) + 1)
    for tile in range(first, stop, BLOCK_N):
        cols = tile + tl.arange(0, BLOCK_N)
        col_ok = cols < num_refs
        scores = tl.full((BLOCK_M, BLOCK_N), 0.0, tl.float32)
        for k in range(0, dim, BLOCK_K):
            ks = k + tl.arange(0, BLOCK_K)
            k_ok = ks < dim
            a = tl.load(query_ptr + wide[:, None] * stride_query + ks[None, :],
                        mask=row_ok[:, None] & k_ok[None, :], other=0.0)
            b = tl.load(ref_ptr + cols.to(tl.int64)[None, :] * stride_ref + ks[:, None],
                        mask=col_ok[None, :] & k_ok[:, None], other=0.0)
            scores = tl.dot(a, b, scores, input_precision="ieee")
        inside = row_ok[:, None] & col_ok[None, :]
        removed = ~inside
        if HAS_IDS:
            ref_ids = tl.load(ref_id_ptr + cols, mask=col_ok, other=0)
            removed = removed | (query_ids[:, None] == ref_ids[None, :])
        if HAS_JUNK:
            junk = tl.load(junk_ptr + wide[:, None] * stride_junk + cols[None, :],
                           mask=row_ok[:, None] & col_ok[None, :], other=1)
            removed = removed | (junk != 0)
        scores = tl.where(removed, float("-inf"), scores)
        if MODE == 0:
            tl.store(out_ptr + wide[:, None] * stride_out + cols[None, :], scores, mask=inside)
        if MODE == 1:
            slot = cols[None, :] - start[:, None]
            positive = inside & (slot >= 0) & (slot < count[:, None])
            tl.store(out_ptr + wide[:, None] * stride_out + slot, scores, mask=positive)
        if MODE == 2:  # pass 0: pos = #{thresholds <= s}; pass 1 (STRICT): #{thresholds < s}, in the second half
            for strict_pass in tl.static_range(1 + STRICT):
                pos = tl.full((BLOCK_M, BLOCK_N), 0, tl.int32)
                step = 1 << (log_width - 1)
                for _ in range(log_width):  # binary search over 2^log_width ascending entries (+inf padding)
                    threshold = tl.load(threshold_ptr + wide[:, None] * stride_threshold + (pos + step - 1),
                                        mask=row_ok[:, None], other=float("inf"))
                    if strict_pass == 0:
                        clears = threshold <= scores
                    else:
                        clears = threshold < scores
                    pos = tl.where(clears, pos + step, pos)
                    step = step // 2
                # an item with pos >= 1 clears the descending thresholds count - pos .. count - 1: one into that bin
                pos = tl.minimum(pos, count[:, None])
                bins = out_ptr + wide[:, None] * stride_out + strict_pass * hist_width + (count[:, None] - pos)
                tl.atomic_add(bins, tl.full((BLOCK_M, BLOCK_N), 1, tl.int32), mask=inside & (pos > 0))


def launch_config_for(arch: int) -> tuple[int, int]:
    """``(BLOCK_K, num_warps)`` on ``sm_<arch>`` (the same for the three modes: their tiles must be computed alike).

    >>> launch_config_for(90), launch_config_for(80)
    ((32, 8), (16, 8))
    """
    return (16, NUM_WARPS) if arch == 80 else (BLOCK_K, NUM_WARPS)


def launch_config(device: torch.device) -> tuple[int, int]:
    """``(BLOCK_K, num_warps)`` on ``device``: its architecture's (:func:`launch_config_for`); the interpreter's
    (CPU tensors) are the defaults."""
    if device.type != "cuda":
        return BLOCK_K, NUM_WARPS
    major, minor = torch.cuda.get_device_capability(device)
    return launch_config_for(10 * major + minor)


_KERNELS: dict[bool, Any] = {}


def metric_counts_kernel(device: torch.device) -> Any:
    """The jitted kernel for tensors on ``device``: compiled for CUDA, Triton's interpreter for the CPU.

    Triton reads ``TRITON_INTERPRET`` when it decorates, so each variant is decorated once, on first use, with the
    variable set accordingly (and restored after).
    """
    interpret = device.type != "cuda"
    if interpret not in _KERNELS:
        saved = os.environ.get("TRITON_INTERPRET")
        os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"
        try:
            _KERNELS[interpret] = triton.jit(_metric_counts)
        finally:
            if saved is None:
                del os.environ["TRITON_INTERPRET"]
            else:
                os.environ["TRITON_INTERPRET"] = saved
    return _KERNELS[interpret]
