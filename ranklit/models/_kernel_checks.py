"""The kernels' self-checks at a run's set-up, before its first step: those of its loss and of its metrics.

A kernel checks itself at its first call anyway (:mod:`ranklit.functional._kernel_guard`); the metrics' first call is
the first validation, after an epoch when ``num_sanity_val_steps: 0``. :class:`ranklit.models.RetrievalModule` calls
:func:`check_run_kernels` in ``on_fit_start``, on the run's device: a kernel that does not compile or disagrees with
the torch path there warns before the first step (or, forced with ``engine="triton"``, stops the run there), and the
torch path computes it from the first step on.
"""

from __future__ import annotations

import functools

import torch
from torch import nn

from ranklit.functional import HAPOptions, SupAPOptions, smooth_rank_engine
from ranklit.functional._kernel_counts import kernel_reason
from ranklit.functional._kernel_guard import kernel_usable
from ranklit.functional._metric_counts_check import metric_kernel_usable
from ranklit.functional._rank_sums import RankSteps
from ranklit.functional._rank_sums_check import kernel_name, probe_rank_sums
from ranklit.losses import SmoothAPLoss

__all__ = ["check_run_kernels", "rank_sum_uses"]


def rank_sum_uses(loss: nn.Module) -> list[tuple[str, RankSteps, bool]]:
    """``(engine, steps, weighted)`` of each smooth-rank loss inside ``loss`` (itself, or a composite's parts)."""
    uses = []
    for module in loss.modules():
        options = getattr(module, "options", None)
        if isinstance(options, SupAPOptions):
            uses.append((options.engine, options.steps(), isinstance(options, HAPOptions)))
        elif isinstance(module, SmoothAPLoss):
            uses.append((module.engine, RankSteps(True, module.tau), False))
    return uses


def check_run_kernels(loss: nn.Module, device: torch.device, dtype: torch.dtype, *, metrics: bool = True) -> None:
    """Run the self-check of every kernel the run will call on ``device``: the smooth-rank sums of ``loss`` for
    scores of ``dtype`` (float32, float64 in a 64-bit run), and the metrics' counting kernel when ``metrics``."""
    shape = torch.empty(0, 0, dtype=dtype, device=device)
    for engine, steps, weighted in rank_sum_uses(loss):
        if smooth_rank_engine(shape, engine) == "triton":
            probe = functools.partial(probe_rank_sums, steps, weighted, device, dtype)
            kernel_usable(kernel_name(steps, weighted), device, dtype, probe, forced=engine == "triton")
    if metrics and kernel_reason(device, torch.float32) is None:
        metric_kernel_usable(device)
