"""The kernels' self-checks at a run's set-up, before its first step: those of its loss and of its metrics.

:class:`ranklit.models.RetrievalModule` calls :func:`check_run_kernels` in ``on_fit_start``, on the run's device
(:func:`ranklit.functional.check_kernels`): a kernel that does not compile or disagrees with the torch path there
warns before the first step (forced with ``engine="triton"``: stops the run there), and the torch path computes it
from the first step on. Without it the metrics kernel would first run at the first validation, after an epoch when
``num_sanity_val_steps: 0``.
"""

from __future__ import annotations

import torch
from torch import nn

from ranklit.functional import SupAPOptions, check_kernels
from ranklit.losses import SmoothAPLoss

__all__ = ["check_run_kernels", "smooth_rank_steps"]


def smooth_rank_steps(loss: nn.Module) -> dict[str, list[SupAPOptions | float]]:
    """The steps of each smooth-rank loss inside ``loss`` (itself, or a composite's parts), by ``engine``: their
    options (SupAP, H-AP) or their temperature (Smooth-AP)."""
    uses: dict[str, list[SupAPOptions | float]] = {}
    for module in loss.modules():
        options = getattr(module, "options", None)
        if isinstance(options, SupAPOptions):
            uses.setdefault(options.engine, []).append(options)
        elif isinstance(module, SmoothAPLoss):
            uses.setdefault(module.engine, []).append(module.tau)
    return uses


def check_run_kernels(loss: nn.Module, device: torch.device, dtype: torch.dtype) -> None:
    """Run the self-check of every kernel the run will call on ``device``: the smooth-rank sums of ``loss`` for
    scores of ``dtype`` (float32, float64 in a 64-bit run), and the metrics' counting kernel."""
    for engine, steps in smooth_rank_steps(loss).items():
        check_kernels(device, dtype, losses=steps, engine=engine, metrics=False)
    check_kernels(device, losses=[], metrics=True)
