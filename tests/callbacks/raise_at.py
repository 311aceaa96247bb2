"""A callback that raises an exception inside one training step, as a CUDA out-of-memory error or a bug would.

``where``: ``"forward"`` (after the network's forward pass of step ``step``, 1-based: its batch-norm running
statistics are already updated), ``"backward"`` (during the backward pass, from a hook on the embeddings' gradient),
``"optimizer"`` (right after the optimiser has updated the weights and its state, before Lightning counts the step:
the worst case), ``"batch_start"`` (in ``on_train_batch_start``, before the step) or ``"validation"`` (in the first
batch of the validation that follows step ``step``). Test-only: the fault-injection suite passes it with
``--trainer.callbacks+=``.
"""

from __future__ import annotations

from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback
from torch import Tensor, nn
from typing_extensions import override


class InjectedFault(RuntimeError):
    """The exception :class:`RaiseAt` raises."""


class RaiseAt(Callback):
    """Raises :class:`InjectedFault` once, ``where`` in training step ``step`` (module docstring)."""

    def __init__(self, step: int = 1, where: str = "forward") -> None:
        if where not in ("forward", "backward", "optimizer", "batch_start", "validation"):
            raise ValueError(f"`where` must be forward, backward, optimizer, batch_start or validation, got {where!r}.")
        self.step, self.where = step, where
        self._trainer: L.Trainer | None = None

    def _due(self) -> bool:
        trainer = self._trainer
        if trainer is None:
            return False
        if self.where == "validation":
            return trainer.validating and trainer.state.fn == "fit" and trainer.global_step == self.step
        return trainer.training and trainer.global_step + 1 == self.step

    def _raise(self, *_: Any) -> None:
        if self._due():
            raise InjectedFault(f"injected fault: {self.where} of step {self.step}")

    def _after_forward(self, module: nn.Module, inputs: Any, output: Tensor) -> None:
        if self.where == "forward":
            self._raise()
        elif self._due() and output.requires_grad:
            output.register_hook(self._raise)

    @override
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._trainer = trainer
        if self.where in ("forward", "backward"):
            net: nn.Module = getattr(pl_module, "net")  # noqa: B009  # RetrievalModule's network
            net.register_forward_hook(self._after_forward)
        elif self.where == "optimizer":
            for optimizer in trainer.optimizers:
                optimizer.register_step_post_hook(self._raise)

    @override
    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if self.where == "batch_start":
            self._raise()

    @override
    def on_validation_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        if self.where == "validation":
            self._raise()
