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
* gradients are clipped by global norm with ``MultistageBackprop(gradient_clip_val=...)`` through
  ``LightningModule.clip_gradients`` (so fp16 gradients are unscaled first);
* :func:`step_lr_schedulers` steps every scheduler at its ``interval`` (``step`` / ``epoch``) and ``frequency``,
  with the monitored value for ``ReduceLROnPlateau``, through the module's ``lr_scheduler_step`` hook, as Lightning's
  automatic loop does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, cast

import lightning as L
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel
from torch.optim import Optimizer

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


def manual_optimization_step(
    module: L.LightningModule, backward: Callable[[], Tensor], batch_idx: int, clip_val: float | None = None
) -> Tensor:
    """Zero the gradients, run ``backward`` (which fills ``.grad``), average them over DDP ranks, clip, step.

    Args:
        module: the LightningModule in manual optimisation (one optimiser).
        backward: computes the loss and its gradients; returns the (detached) loss.
        batch_idx: index of the batch in the epoch (the ``frequency`` of step-interval schedulers counts batches).
        clip_val: maximum global gradient norm, or ``None``.

    Returns:
        The loss returned by ``backward``.
    """
    optimizer = module.optimizers()
    if isinstance(optimizer, list):
        raise ValueError(f"Multistage backprop steps one optimizer, got {len(optimizer)} from `configure_optimizers`.")
    optimizer.zero_grad()
    loss = backward()
    average_gradients(module.parameters())
    if clip_val is not None:
        # Lightning documents `clip_gradients(self.optimizers(), ...)`; its annotation only names `Optimizer`
        module.clip_gradients(cast(Optimizer, optimizer), gradient_clip_val=clip_val, gradient_clip_algorithm="norm")
    optimizer.step()
    step_lr_schedulers(module, "step", batch_idx)
    return loss


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
