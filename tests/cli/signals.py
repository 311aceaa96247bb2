"""A callback that sends a signal to its own process at a given step: a Ctrl-C or a ``SIGTERM`` at a known point."""

from __future__ import annotations

import os
import signal
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback
from typing_extensions import override


class SignalAt(Callback):
    """Sends ``signal`` (``"SIGINT"``, ``"SIGTERM"``) to this process at the end of the batch that makes the global step
    ``step``: ``SIGINT`` raises ``KeyboardInterrupt`` there (Ctrl-C), Lightning stops after the batch on ``SIGTERM``."""

    def __init__(self, step: int, signal: str = "SIGINT") -> None:
        self.step, self.signal = step, signal

    @override
    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if trainer.global_step == self.step:
            os.kill(os.getpid(), getattr(signal, self.signal))
