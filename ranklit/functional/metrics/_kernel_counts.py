"""The kernel path of the exact metrics' counting on CUDA: the torch path's counts without the ``Q x N`` scores.

The torch path (:mod:`ranklit.functional.metrics._row_metrics`) writes a chunk's ``[C, N]`` scores, then reads them back
to rank each query's positives (flat labels) or relevant items (hierarchical) by counting the items scoring at least as
high (:func:`~ranklit.functional.metrics._positive_ranks.positive_counts`). Here a Triton kernel
(:mod:`ranklit.functional._kernels._triton_counts`) computes the scores tile by tile and counts them where they are
computed, in two launches per chunk: the positives' scores, then (once they are sorted, in torch) the counts. The result
is the torch path's :class:`KernelCounts`, so every metric formula is shared.

**What is equal.** The kernel's scores come from ``tl.dot`` in float32 without TF32, summed in another order than
cuBLAS/MKL: a score can differ from the torch path's in its last bits. Each positive is counted against scores
computed exactly as its own (the same tiles of the same grid), so the counts are, exactly, those of the torch path run
on the kernel's scores (:meth:`KernelCounter.scores`; tested through Triton's interpreter and, under ``-m gpu``, the
compiled kernel). They equal the CPU path's whenever no two scores of a query that the CPU path orders one way lie
within round-off of each other (a few ulps of float32) in the other order: then no comparison changes. Near-ties
can order differently (as between any two BLAS libraries); exact ties of equal embeddings stay ties.

**When it runs** (:func:`kernel_reason`): CUDA tensors, Triton importable, float32 scores (inputs of float16, bfloat16
or float32; float64 keeps the torch path, with a warning) and ``RANKLIT_METRICS_KERNEL`` not ``0``. Everything the
torch path accepts goes through it: galleries or not, ids (repeated too), junk, the three tie policies, queries
without positives, non-contiguous embeddings (copied), ``[N, L]`` labels.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import math
import os
import warnings
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from ranklit.functional._kernels._guard import KernelLaunchError, kernel_device, triton_version_problem
from ranklit.functional.inputs import RetrievalInputs
from ranklit.functional.metrics._positive_ranks import SortedKeys, sort_positive_scores

__all__ = ["KernelCounts", "KernelCounter", "fallback_warning", "kernel_reason", "metrics_kernel"]

SWITCH = "RANKLIT_METRICS_KERNEL"


def kernel_reason(device: torch.device, dtype: torch.dtype) -> str | None:
    """Why the kernel path cannot run for scores of ``dtype`` on ``device`` (``None``: it can).

    >>> kernel_reason(torch.device("cpu"), torch.float32)
    'a CPU tensor (the kernel path is for CUDA tensors)'
    """
    if device.type != "cuda":
        return f"a {device.type.upper()} tensor (the kernel path is for CUDA tensors)"
    if os.environ.get(SWITCH, "1") == "0":
        return f"{SWITCH}=0"
    if importlib.util.find_spec("triton") is None:
        return "Triton is not installed (it ships with PyTorch's Linux CUDA wheels)"
    failure = _triton_failure()
    if failure is not None:
        return f"Triton does not import ({failure})"
    too_old = triton_version_problem()
    if too_old is not None:
        return too_old
    if dtype != torch.float32:
        return f"{dtype} scores (the kernel computes in float32)"
    return None


def fallback_warning(device: torch.device, dtype: torch.dtype) -> str | None:
    """The warning the metrics give when they count with the torch path on a CUDA device (``None``: no warning;
    the CPU path and ``RANKLIT_METRICS_KERNEL=0`` are silent).

    >>> fallback_warning(torch.device("cpu"), torch.float64) is None
    True
    """
    reason = kernel_reason(device, dtype)
    if reason is None or device.type != "cuda" or reason.startswith(SWITCH):
        return None
    return f"The exact metrics count with the torch path, not the Triton kernel: {reason}."


def metrics_kernel(x: RetrievalInputs, junk: Tensor | None) -> KernelCounter | None:
    """The :class:`KernelCounter` of a problem, or ``None`` where the torch path runs (:func:`kernel_reason`), with
    a ``UserWarning`` on CUDA (:func:`fallback_warning`)."""
    device, dtype = x.queries.device, x.queries.dtype
    if kernel_reason(device, dtype) is None:
        return KernelCounter(x, junk)
    message = fallback_warning(device, dtype)
    if message is not None:
        warnings.warn(message, UserWarning, stacklevel=3)
    return None


@functools.cache
def _triton_failure() -> str | None:
    """The error importing Triton raises, once per process (``None``: it imports)."""
    try:
        importlib.import_module("triton.language")
    except Exception as error:  # a broken install must give the torch path, not a traceback
        return f"{type(error).__name__}: {error}"
    return None


@dataclass(frozen=True)
class KernelCounts:
    """A chunk's positives (flat) or relevant items (hierarchical) by decreasing score, and their counts.

    Attributes:
        descending: ``[C, W]`` their scores (``-inf`` padding last), as from
            :func:`~ranklit.functional.metrics._positive_ranks.sort_positive_scores`.
        valid: ``[C, W]`` which entries are real.
        columns: ``[C, W]`` their columns in the retrieval set (padding: column 0).
        at_least: ``[C, W]`` int64 ``#{j : s_j >= s}`` (0 where not real).
        above: ``[C, W]`` int64 ``#{j : s_j > s}``, or ``None`` unless asked for.
    """

    descending: Tensor
    valid: Tensor
    columns: Tensor
    at_least: Tensor
    above: Tensor | None


class _Chunk(NamedTuple):
    queries: Tensor
    query_ids: Tensor | None
    junk: Tensor | None


class KernelCounter:
    """The retrieval set of a problem sorted by its coarsest label, and the kernel's launches on chunks of queries.

    Args:
        x: the prepared problem (float32 embeddings).
        junk: ``[Q, N]`` bool items removed from each query's ranking, or ``None``.
    """

    def __init__(self, x: RetrievalInputs, junk: Tensor | None) -> None:
        from ranklit.functional._kernels import _triton_counts

        self._triton = _triton_counts
        self.x = x
        self.label_keys = SortedKeys(x.ref_labels[:, -1])
        self.order = self.label_keys.order  # retrieval-set position of each sorted column
        self.junk = None if junk is None else junk.index_select(1, self.order).view(torch.uint8)  # sorted columns
        self.refs = x.refs.index_select(0, self.order).contiguous()
        self.ref_ids = None if x.ref_ids is None or x.query_ids is None else x.ref_ids[self.order].contiguous()
        self.kernel = _triton_counts.metric_counts_kernel(x.queries.device)

    def bytes_per_query(self, max_relevant: int) -> int:
        """Memory a query of a chunk holds: about 80 bytes per positive (scores, thresholds, histograms, columns,
        counts) and, with junk, its ``N`` junk flags."""
        return 80 * max_relevant + (self.refs.shape[0] if self.junk is not None else 0)

    def by_label(self, rows: Tensor) -> Tensor:
        """``rows`` ordered by their coarsest label, so a program's queries share their positives' tiles."""
        return rows[torch.argsort(self.x.query_labels[rows, -1], stable=True)]

    def _chunk(self, rows: Tensor) -> _Chunk:
        """The kernel's inputs of the queries ``rows``: embeddings, ids, junk flags in the sorted columns' order."""
        x = self.x
        query_ids = None if self.ref_ids is None or x.query_ids is None else x.query_ids[rows].contiguous()
        junk = None if self.junk is None else self.junk.index_select(0, rows)
        return _Chunk(x.queries.index_select(0, rows).contiguous(), query_ids, junk)

    def _launch(self, chunk: _Chunk, mode: int, start: Tensor, count: Tensor, out: Tensor, *,
                tiles: Tensor | None = None, thresholds: Tensor | None = None, log_width: int = 1,
                hist_width: int = 0, strict: bool = False) -> None:
        t, (queries, query_ids, junk) = self._triton, chunk
        thresholds = out if thresholds is None else thresholds
        grid = (-(-queries.shape[0] // t.BLOCK_M),)  # programs of BLOCK_M queries
        block_k, warps = t.launch_config(queries.device)
        try:
            with kernel_device(queries.device):
                self.kernel[grid](
                    queries, self.refs, query_ids if query_ids is not None else start,
                    self.ref_ids if self.ref_ids is not None else start, junk if junk is not None else start, start,
                    count, start if tiles is None else tiles, thresholds, out,
                    queries.shape[0], self.refs.shape[0], queries.shape[1], log_width, hist_width, queries.stride(0),
                    self.refs.stride(0), junk.stride(0) if junk is not None else 0, thresholds.stride(0),
                    out.stride(0), MODE=mode, HAS_IDS=query_ids is not None, HAS_JUNK=junk is not None,
                    STRICT=int(strict), BLOCK_M=t.BLOCK_M, BLOCK_N=t.BLOCK_N, BLOCK_K=block_k, num_warps=warps,
                )
        except Exception as error:  # a compile or launch error: the caller recomputes with the torch path
            raise KernelLaunchError(f"the metrics' counting kernel failed: {error}") from error

    def _tiles(self, start: Tensor, count: Tensor) -> Tensor:
        """``[B, 2]`` int64 first and end column of the tiles holding the positives of each program's queries (their
        runs ``start .. start + count`` of the sorted retrieval set), the first on the grid of ``BLOCK_N`` columns."""
        block, tile, num_refs = self._triton.BLOCK_M, self._triton.BLOCK_N, self.refs.shape[0]
        padding = (-start.numel()) % block
        has = torch.nn.functional.pad(count > 0, (0, padding)).view(-1, block)
        begin = torch.nn.functional.pad(start, (0, padding)).view(-1, block)
        end = torch.nn.functional.pad(start + count, (0, padding)).view(-1, block)
        first = torch.where(has, begin, num_refs).amin(1).div(tile, rounding_mode="floor") * tile
        return torch.stack([first, torch.where(has, end, 0).amax(1)], 1).contiguous()

    def scores(self, rows: Tensor) -> Tensor:
        """``[C, N]`` the kernel's scores of the queries ``rows`` (launched in this order), retrieval-set columns,
        removed items ``-inf``: what :meth:`counts` counts (for tests; this writes the whole matrix)."""
        zeros = torch.zeros(rows.numel(), dtype=torch.int64, device=rows.device)
        sorted_scores = self.x.queries.new_empty(rows.numel(), self.refs.shape[0])
        self._launch(self._chunk(rows), self._triton.MODE_SCORES, zeros, zeros, sorted_scores)
        scores = torch.empty_like(sorted_scores)
        scores[:, self.order] = sorted_scores
        return scores

    def counts(self, rows: Tensor, strict: bool) -> KernelCounts:
        """The counts of the queries ``rows`` (launched in this order; see :meth:`by_label`), as the torch path's
        :func:`~ranklit.functional.metrics._positive_ranks.positive_counts` gives them on :meth:`scores`."""
        start, count = self.label_keys.runs(self.x.query_labels[rows, -1])
        width = int(count.max()) if count.numel() else 0
        positives = self.x.queries.new_full((rows.numel(), max(width, 1)), -math.inf)
        chunk = self._chunk(rows)
        self._launch(chunk, self._triton.MODE_POSITIVES, start, count, positives, tiles=self._tiles(start, count))
        slots = torch.arange(width, device=rows.device).expand(rows.numel(), width)
        descending, _, valid, slot = sort_positive_scores(positives[:, :width], slots, slots < count[:, None])
        real = valid.sum(1)
        columns = self.order[(start[:, None] + slot).clamp(max=max(self.refs.shape[0] - 1, 0))]
        columns = torch.where(valid, columns, 0)
        num = descending.shape[1]
        at_least = torch.zeros(descending.shape, dtype=torch.int64, device=rows.device)
        above = at_least.clone() if strict else None
        if num > 0:
            log_width = max(1, math.ceil(math.log2(num + 1)))  # at least one +inf entry after the real ones
            position = torch.arange(2**log_width, device=rows.device)
            ascending = descending.gather(1, (real[:, None] - 1 - position).clamp(0, num - 1))
            ascending = torch.where(position < real[:, None], ascending, math.inf).contiguous()
            histogram = torch.zeros(rows.numel(), (1 + strict) * (num + 1), dtype=torch.int32, device=rows.device)
            self._launch(chunk, self._triton.MODE_COUNTS, start, real, histogram, thresholds=ascending,
                         log_width=log_width, hist_width=num + 1, strict=strict)
            at_least = torch.where(valid, histogram[:, :num].cumsum(1), 0)
            if strict:
                above = torch.where(valid, histogram[:, num + 1 : 2 * num + 1].cumsum(1), 0)
        return KernelCounts(descending, valid, columns, at_least, above)

