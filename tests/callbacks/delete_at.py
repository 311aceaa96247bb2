"""A callback that deletes a folder at the start of a given training step (the checkpoints folder deleted mid-run)."""

from __future__ import annotations

import shutil
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback
from typing_extensions import override


class DeleteAt(Callback):
    """Deletes ``folder`` (relative to the working directory) once, at the start of training step ``step`` (1-based),
    on global rank 0."""

    def __init__(self, step: int, folder: str) -> None:
        self.step, self.folder = step, folder

    @override
    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if trainer.global_step + 1 == self.step and trainer.is_global_zero:
            shutil.rmtree(self.folder)
