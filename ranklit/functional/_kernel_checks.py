""":func:`check_kernels`: the kernels' self-checks on a device, on demand (before a run's first step, or by a user).

A kernel checks itself at its first call anyway (:mod:`ranklit.functional._kernels._guard`); the metrics' first call is
the first validation, after an epoch when ``num_sanity_val_steps: 0``. :class:`ranklit.models.RetrievalModule`
calls :func:`check_kernels` in ``on_fit_start`` with its loss's steps; ``ranklit check gpu`` with every variant.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from ranklit.functional._kernels._guard import kernel_state, kernel_usable, last_failure
from ranklit.functional._kernels._rank_engine import smooth_rank_engine
from ranklit.functional._kernels._rank_sums import RankSteps
from ranklit.functional._kernels._rank_sums_check import kernel_name, probe_rank_sums
from ranklit.functional.losses._hap import HAPOptions
from ranklit.functional.losses._smooth_rank import SupAPOptions
from ranklit.functional.metrics import _kernel_counts
from ranklit.functional.metrics._kernel_check import METRICS_KERNEL, probe_metric_counts

__all__ = ["KernelCheck", "check_kernels"]


@dataclass(frozen=True)
class KernelCheck:
    """The outcome of one kernel's self-check: ``passed``, else ``error`` (the warning given; the torch path runs it
    for the rest of the process); ``seconds`` its duration (compilation included; 0 when checked before).

    >>> KernelCheck(kernel="rank sums", dtype=torch.float32, passed=False, error="launch failed", seconds=0.5).error
    'launch failed'
    """

    kernel: str
    dtype: torch.dtype
    passed: bool
    error: str
    seconds: float


def _variant(item: SupAPOptions | float) -> tuple[RankSteps, bool]:
    if isinstance(item, SupAPOptions):
        return item.steps(), isinstance(item, HAPOptions)
    return RankSteps(True, float(item)), False


def check_kernels(
    device: torch.device | str,
    dtype: torch.dtype = torch.float32,
    *,
    losses: Iterable[SupAPOptions | float] | None = None,
    engine: str = "auto",
    metrics: bool = True,
    on_cpu: bool = False,
) -> list[KernelCheck]:
    """Run the self-check of the kernels a run will call on ``device``, once per process (later calls reuse it).

    Args:
        device: where the kernels will run (CUDA; CPU tensors only through Triton's interpreter).
        dtype: the losses' scores (float32; float64 in a 64-bit run). The metrics' kernel is float32.
        losses: the smooth-rank losses' steps: a :class:`~ranklit.functional.SupAPOptions` or
            :class:`~ranklit.functional.HAPOptions` (their bounds), or Smooth-AP's temperature ``tau``; ``None``: every
            variant with its default parameters.
        engine: the losses' ``engine``: ``"auto"`` checks the kernels where it would pick them (CUDA), ``"triton"``
            everywhere and raises ``KernelError`` on a failure, ``"torch"`` none.
        metrics: check the metrics' counting kernel too (where the metrics would use it: CUDA, float32).
        on_cpu: check on CPU tensors too, through Triton's interpreter (``ranklit check gpu`` without CUDA).

    Returns:
        One :class:`KernelCheck` per kernel checked (none on the CPU without ``engine="triton"``).

    Example:
        >>> check_kernels("cpu")  # the CPU runs the torch path: nothing to check
        []
    """
    device = torch.device(device)
    items: list[SupAPOptions | float] = (
        [0.01, SupAPOptions(), HAPOptions(with_hrank=False), HAPOptions()] if losses is None else list(losses))
    checks: list[tuple[str, torch.dtype, Callable[[], None], bool]] = []
    interpreted = on_cpu and device.type == "cpu"
    if interpreted or smooth_rank_engine(torch.empty(0, 0, dtype=dtype, device=device), engine) == "triton":
        for steps, weighted in dict.fromkeys(_variant(item) for item in items):
            checks.append((kernel_name(steps, weighted), dtype,
                           functools.partial(probe_rank_sums, steps, weighted, device, dtype), engine == "triton"))
    if metrics and (interpreted or _kernel_counts.kernel_reason(device, torch.float32) is None):
        checks.append((METRICS_KERNEL, torch.float32, functools.partial(probe_metric_counts, device), False))
    results = []
    for name, kind, probe, forced in checks:
        start = time.perf_counter()
        fresh = kernel_state(name, device, kind) == "unchecked"
        passed = kernel_usable(name, device, kind, probe, forced=forced)
        seconds = time.perf_counter() - start if fresh else 0.0
        results.append(KernelCheck(name, kind, passed, "" if passed else last_failure(name, device, kind), seconds))
    return results
