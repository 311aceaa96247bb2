"""Resuming with other learning rates: the explicit way to continue a run after a non-finite stop with a lower rate.

A resumed run restores its optimisers and schedulers from the checkpoint, learning rates included, so a changed
``--model.optimizer.init_args.lr`` would be silently ignored; the ``ranklit`` command refuses it unless it is named
in ``--resume_new_rates '[KEY, ...]'`` (learning-rate settings only: ``model.optimizer.init_args.lr``,
``model.head_lr``, ``model.loss_lr``). :class:`NewLearningRates` then applies the new rates after the restore: every
parameter group's rate is multiplied by ``new base rate / checkpoint's base rate``, and so are the base rates of the
schedulers (a schedule continues where it was, scaled), where a group's base rate is its ``initial_lr`` (set by a
scheduler) or its ``lr``.

Example:
    >>> group = {"lr": 0.5, "initial_lr": 1.0}  # halfway through a schedule from 1.0
    >>> scale_group(group, new_base=0.25)
    0.25
    >>> group
    {'lr': 0.125, 'initial_lr': 0.25}
"""

from __future__ import annotations

from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback
from typing_extensions import override

__all__ = ["RATE_SETTINGS", "NewLearningRates", "scale_group"]

#: The settings ``--resume_new_rates`` may name.
RATE_SETTINGS = ("model.optimizer.init_args.lr", "model.head_lr", "model.loss_lr")


def _base(group: dict[str, Any]) -> float:
    return float(group.get("initial_lr", group["lr"]))


def scale_group(group: dict[str, Any], new_base: float) -> float:
    """Scale a parameter group's ``lr`` (and ``initial_lr``) so that its base rate becomes ``new_base``; returns
    the factor."""
    base = _base(group)
    factor = new_base / base
    group["lr"] = new_base if group["lr"] == base else group["lr"] * factor
    if "initial_lr" in group:
        group["initial_lr"] = new_base
    return factor


class NewLearningRates(Callback):
    """Gives a resumed run the base learning rates of its configuration (module docstring)."""

    def __init__(self) -> None:
        self._configured: list[list[float]] = []

    @override
    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # the optimisers are built from the configuration, not yet restored from the checkpoint
        self._configured = [[_base(g) for g in optimizer.param_groups] for optimizer in trainer.optimizers]

    @override
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        for optimizer, rates in zip(trainer.optimizers, self._configured, strict=True):
            factors = [scale_group(group, rate) for group, rate in zip(optimizer.param_groups, rates, strict=True)]
            for config in trainer.lr_scheduler_configs:
                scheduler: Any = config.scheduler
                if scheduler.optimizer is optimizer and hasattr(scheduler, "base_lrs"):
                    scheduler.base_lrs = [r * f for r, f in zip(scheduler.base_lrs, factors, strict=True)]
                if scheduler.optimizer is optimizer and hasattr(scheduler, "_last_lr"):
                    scheduler._last_lr = [group["lr"] for group in optimizer.param_groups]
