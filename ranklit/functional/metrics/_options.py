"""Validation of the options of :func:`ranklit.functional.retrieval_metrics` and the size of its chunks."""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch
from torch import Tensor

from ranklit._checks import check_choice

__all__ = [
    "AVERAGES",
    "cached_rows",
    "check_average",
    "check_cutoffs",
    "check_junk",
    "check_recall_at",
    "memory_budget",
    "metrics_chunk_size",
]

AVERAGES = ("query", "class")

_CPU_CHUNK_BYTES = 256 * 2**20
_CPU_CACHED_SCORES = 2**22  # 16 MiB of float32 scores: a block's scores stay in a last-level cache while counted
_CPU_MIN_ROWS = 64  # fewer rows would make each block's product re-read the whole gallery for little work


def check_cutoffs(values: Sequence[int], name: str = "recall_at") -> tuple[int, ...]:
    """Validate the cut-offs of a metric (``recall_at``, ``ndcg_at``): a non-empty sequence of positive integers.

    >>> check_cutoffs([4, 1, 4])
    (1, 4)
    """
    checked = tuple(values) if isinstance(values, Sequence) and not isinstance(values, str) else None
    if not checked or not all(isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in checked):
        raise ValueError(
            f"`{name}` must be a non-empty sequence of positive integers, e.g. (1, 2, 4, 8), got {values!r}."
        )
    return tuple(sorted(set(checked)))


def check_recall_at(recall_at: Sequence[int]) -> tuple[int, ...]:
    """:func:`check_cutoffs` for ``recall_at``."""
    return check_cutoffs(recall_at, "recall_at")


def check_average(average: str) -> str:
    """Raise ``ValueError`` unless ``average`` is ``"query"`` or ``"class"``.

    >>> check_average("class")
    'class'
    """
    meaning = "the mean over the queries, or over the classes of the per-class means: pytorch-metric-learning's "
    meaning += "avg_of_avgs"
    return check_choice("average", average, AVERAGES, meaning)


def metrics_chunk_size(
    num_queries: int,
    num_refs: int,
    num_levels: int,
    device: torch.device,
    max_relevant: int | None = None,
    kernel_bytes: int | None = None,
) -> int:
    """Queries per chunk so one chunk's working tensors fit in a quarter of the free memory.

    A query costs about ``32 N`` bytes (its scores and comparison flags) plus, with hierarchical labels,
    ``96 + 16 L`` bytes per relevant item (levels, per-level counts, float64 terms), of which it has at most
    ``max_relevant`` (default ``N``). On CPU the chunk is also capped at 256 MiB (the comparison passes run over
    cache-sized tiles of it). On the kernel path, which never holds a chunk's scores, ``kernel_bytes`` replaces the
    ``32 N`` (:meth:`~ranklit.functional.metrics._kernel_counts.KernelCounter.bytes_per_query`).

    >>> metrics_chunk_size(100, 1000, 1, torch.device("cpu"))
    100
    """
    relevant = num_refs if max_relevant is None else max_relevant
    bytes_per_query = (32 * num_refs if kernel_bytes is None else kernel_bytes) + (
        0 if num_levels == 1 else (96 + 16 * num_levels) * relevant
    )
    return max(1, min(num_queries, memory_budget(device) // max(1, bytes_per_query)))


def memory_budget(device: torch.device) -> int:
    """Bytes a metric's working tensors may take: a quarter of the free memory (on CPU, at most 256 MiB).

    >>> 0 < memory_budget(torch.device("cpu")) <= 256 * 2**20
    True
    """
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return free // 4
    available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 0
    return min(_CPU_CHUNK_BYTES, available // 4) if available > 0 else _CPU_CHUNK_BYTES


def check_junk(junk: Tensor | None, num_queries: int, num_refs: int, device: torch.device) -> Tensor | None:
    """``junk`` on ``device`` after checking it is a ``[Q, N]`` bool tensor (``None`` stays ``None``)."""
    if junk is None:
        return None
    if not isinstance(junk, Tensor) or junk.dtype != torch.bool or tuple(junk.shape) != (num_queries, num_refs):
        got = (junk.dtype, tuple(junk.shape)) if isinstance(junk, Tensor) else type(junk).__name__
        raise ValueError(
            f"`junk` must be a [Q, N] = [{num_queries}, {num_refs}] bool tensor marking the items removed from each "
            f"query's ranking, got {got}."
        )
    return junk.to(device)


def cached_rows(num_refs: int, device: torch.device) -> int:
    """Queries per block of the flat row-by-row metrics: on CPU as many as ``2^22`` scores (16 MiB) hold, at least
    64, so the passes that find the items above each query's lowest positive read scores the product has just left
    in the last-level cache (2,000 queries x 8,000 items, d = 128: 1.8x the product with one block of the chunk's
    1,048 queries, 1.3x with blocks of 524; ``benchmarks/metrics.py``); on GPU no limit. The values do not change:
    the blocks' positives and counts are concatenated into the chunk's before any metric is computed, and MKL
    (PyTorch's x86 BLAS) gives a row the same scores in any product of 64 rows or more (checked for d = 64-512 and
    8,000-46,000 items, one and two threads).

    >>> cached_rows(8000, torch.device("cpu")), cached_rows(10**6, torch.device("cpu"))
    (524, 64)
    """
    if device.type != "cpu":
        return 2**62
    return max(_CPU_MIN_ROWS, _CPU_CACHED_SCORES // max(1, num_refs))
