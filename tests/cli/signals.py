"""A callback that sends a signal to its own process at a given step: a Ctrl-C or a ``SIGTERM`` at a known point."""

from __future__ import annotations

import os
import signal
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback
from typing_extensions import override


class SignalAt(Callback):
    """Sends ``signal`` (``"SIGINT"``, ``"SIGTERM"``) to this process during training step ``step`` (1-based),
    between its forward and its backward pass: an interruption in the middle of a step, as a real Ctrl-C or a
    scheduler's preemption mostly is."""

    def __init__(self, step: int, signal: str = "SIGINT") -> None:
        self.step, self.signal = step, signal

    @override
    def on_before_backward(self, trainer: L.Trainer, pl_module: L.LightningModule, loss: Any) -> None:
        if trainer.global_step + 1 == self.step:
            os.kill(os.getpid(), getattr(signal, self.signal))
