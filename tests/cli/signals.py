"""A callback that sends a signal at a known point of a run: a Ctrl-C, a ``SIGTERM`` or a ``kill -9`` in a given phase.

Phases: ``"train"`` (during training step ``step``, 1-based, between its forward and its backward pass: an
interruption in the middle of a step, as a real Ctrl-C or a scheduler's preemption mostly is), ``"baseline"`` (during
the first batch of the step-0 baseline validation), ``"validation"`` (during the first batch of the validation that
follows step ``step``), ``"test"`` (during the first batch of ``ranklit test``), ``"checkpoint"`` (while a
checkpoint of step ``step`` is being assembled), ``"teardown"`` (after the last training batch) and ``"predict"`` (at
the start of prediction batch ``step``, 1-based). ``to``: ``"self"`` (this process), ``"group"`` (every process of
the run, as a scheduler or ``docker stop`` does: the process group, sent by rank 0), ``"parent"`` (rank 0's parent:
``torchrun``'s agent), or a rank number (that process only). The time of the signal is appended to ``stamp`` (a
file) when given, to measure the time from signal to exit.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback
from typing_extensions import override


class SignalAt(Callback):
    """Sends ``signal`` (``"SIGINT"``, ``"SIGTERM"``, ``"SIGUSR1"``, ``"SIGKILL"``) once, in ``phase`` (module
    docstring)."""

    def __init__(
        self, step: int = 1, signal: str = "SIGINT", phase: str = "train", to: str = "self", stamp: str | None = None
    ) -> None:
        self.step, self.signal, self.phase, self.to, self.stamp = step, signal, phase, to, stamp
        self._sent = False

    def _send(self, trainer: L.Trainer) -> None:
        if self._sent:
            return
        self._sent = True
        sender = 0 if self.to in ("group", "parent") else None if self.to == "self" else int(self.to)
        if sender is not None and trainer.global_rank != sender:
            return
        if self.stamp:
            with open(self.stamp, "a") as file:
                file.write(f"{time.time()}\n")
        number = getattr(signal, self.signal)
        if self.to == "group":
            os.killpg(os.getpgid(0), number)
        elif self.to == "parent":  # the launcher (torchrun's agent)
            os.kill(os.getppid(), number)
        else:
            os.kill(os.getpid(), number)

    @override
    def on_before_backward(self, trainer: L.Trainer, pl_module: L.LightningModule, loss: Any) -> None:
        if self.phase == "train" and trainer.global_step + 1 == self.step:
            self._send(trainer)

    @override
    def on_validation_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        fitting = trainer.state.fn == "fit"
        due = trainer.global_step == self.step if fitting else True
        if self.phase == ("validation" if fitting else "baseline") and due:
            self._send(trainer)

    @override
    def on_test_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        if self.phase == "test":
            self._send(trainer)

    @override
    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        if self.phase == "checkpoint" and trainer.global_step == self.step:
            self._send(trainer)

    @override
    def on_predict_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        if self.phase == "predict" and batch_idx + 1 == self.step:
            self._send(trainer)

    @override
    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.phase == "teardown":
            self._send(trainer)
