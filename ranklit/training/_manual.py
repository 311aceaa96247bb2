"""Manual optimisation for multistage backprop in Lightning: one optimiser step, DDP sync, clipping, LR schedulers.

Multistage backprop runs several backward passes per optimiser step, so :class:`ranklit.models.RetrievalModule`
switches to Lightning's manual optimisation when it is given a ``multistage``
(:class:`ranklit.training.MultistageBackprop`, config key ``model.multistage``). Lightning then neither clips
gradients (``trainer.gradient_clip_val`` is rejected), nor steps learning-rate schedulers, nor lets DDP average
gradients across several backward passes; this module does all three so that a multistage run behaves like an
automatic one:

* :func:`prepare_ddp` switches DDP's gradient hooks off (they expect one backward pass per forward), and
  :func:`manual_optimization_step` averages the gradients once, after the last chunk
  (:func:`ranklit.training._distributed.average_gradients`);
* the backward passes run as the optimiser step's closure, so that under ``16-mixed`` Lightning's gradient scaler
  scales the loss (``manual_backward``), unscales the gradients after the closure, skips a step whose gradients
  overflowed and updates its scale, as in automatic optimisation; gradients are clipped by global norm
  (``MultistageBackprop(gradient_clip_val=...)``) in the module's ``on_before_optimizer_step`` hook, the one point
  between the unscaling and the step, so the clipping sees the true gradients;
* :func:`step_lr_schedulers` steps every scheduler at its ``interval`` (``step`` / ``epoch``) and ``frequency``,
  with the monitored value for ``ReduceLROnPlateau``, through the module's ``lr_scheduler_step`` hook, as Lightning's
  automatic loop does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import lightning as L
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel

from ranklit._compat.lightning import skip_ddp_gradient_sync
from ranklit.training._distributed import average_gradients, is_distributed

__all__ = ["prepare_ddp", "manual_optimization_step", "step_lr_schedulers"]


def prepare_ddp(trainer: L.Trainer) -> None:
    """Let several backward passes run before one optimiser step: switch off DDP's gradient synchronisation.

    DDP then also stops broadcasting rank 0's buffers before each forward pass, so batch-norm running statistics
    evolve per rank; freeze batch-norm (``EmbeddingNet(freeze_batchnorm=True)``, as the ROADMAP and HAPPIER recipes
    do), which multistage backprop needs for exact gradients anyway.

    Raises:
        ValueError: a multi-process strategy other than DDP (FSDP, DeepSpeed shard parameters, so the embedding
            network cannot be re-run chunk by chunk with plain gradient accumulation).
    """
    if not is_distributed():
        return
    model = trainer.strategy.model
    if not isinstance(model, DistributedDataParallel):
        raise ValueError(
            f"Multistage backprop supports one device or the DDP strategy, got {type(trainer.strategy).__name__}: "
            "set `trainer.strategy: ddp` or `model.multistage: null`."
        )
    skip_ddp_gradient_sync(model)


def manual_optimization_step(module: L.LightningModule, backward: Callable[[], Tensor], batch_idx: int) -> Tensor:
    """One optimiser step whose closure zeroes the gradients, runs ``backward`` and averages them over DDP ranks.

    Lightning's precision plugin runs the closure, then (``16-mixed``) unscales the gradients, calls
    ``on_before_optimizer_step`` (where :class:`ranklit.models.RetrievalModule` clips them) and steps through its
    gradient scaler, which skips a step with non-finite gradients.

    Args:
        module: the LightningModule in manual optimisation (one optimiser).
        backward: computes the loss and its gradients (through ``module.manual_backward``, which scales the loss
            under ``16-mixed``); returns the (detached) loss.
        batch_idx: index of the batch in the epoch (the ``frequency`` of step-interval schedulers counts batches).

    Returns:
        The loss returned by ``backward``.
    """
    optimizer = module.optimizers()
    if isinstance(optimizer, list):
        raise ValueError(f"Multistage backprop steps one optimizer, got {len(optimizer)} from `configure_optimizers`.")
    losses: list[Tensor] = []

    def closure() -> Tensor:
        optimizer.zero_grad()
        losses.append(backward())
        average_gradients(module.parameters())
        return losses[-1]

    optimizer.step(closure=closure)
    step_lr_schedulers(module, "step", batch_idx)
    return losses[-1]


def step_lr_schedulers(module: L.LightningModule, interval: Literal["step", "epoch"], batch_idx: int = 0) -> None:
    """Step the schedulers of ``interval`` whose ``frequency`` divides ``batch_idx + 1`` (step) or ``epoch + 1``.

    ``ReduceLROnPlateau`` receives the monitored value from ``trainer.callback_metrics``; when it is missing a
    ``ValueError`` lists the available metrics (``strict: false`` in the scheduler config skips the update instead).
    """
    trainer = module.trainer
    count = (batch_idx if interval == "step" else trainer.current_epoch) + 1
    for config in trainer.lr_scheduler_configs:
        if config.interval != interval or count % config.frequency:
            continue
        value = None
        if config.reduce_on_plateau:
            value = trainer.callback_metrics.get(str(config.monitor))
            if value is None:
                if not config.strict:
                    continue
                raise ValueError(
                    f"ReduceLROnPlateau monitors {config.monitor!r}, which was not logged. Logged metrics: "
                    f"{sorted(trainer.callback_metrics)}. Set the scheduler's `monitor` to one of them."
                )
        module.lr_scheduler_step(config.scheduler, value)
