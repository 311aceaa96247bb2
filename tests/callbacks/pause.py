"""A callback that holds a run at the start of training for ``seconds``: a window in which other launches of the
same run are sure to meet its lock (``tests/callbacks/test_fault_injection.py``'s concurrent resumes)."""

from __future__ import annotations

import time

import lightning as L
from lightning.pytorch.callbacks import Callback
from typing_extensions import override


class PauseAtStart(Callback):
    """Sleeps ``seconds`` in ``on_train_start`` (changes no state of the run)."""

    def __init__(self, seconds: float = 5.0) -> None:
        self.seconds = seconds

    @override
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        time.sleep(self.seconds)
