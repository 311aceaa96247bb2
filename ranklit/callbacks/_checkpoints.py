"""``RunCheckpoint``: a save schedule independent of metrics, rotated, and written atomically.

Every run saves ``checkpoints/last.ckpt`` of its run directory

* at the end of every training epoch (after its validation and its ``metrics.csv`` rows), and, optionally,
* every ``every_n_steps`` optimiser steps and/or every ``every_minutes`` minutes of training (checked at the start
  of a batch: the checkpoint holds the state after the previous batch, its ``metrics.csv`` row included),

whatever the validation metrics do (a ``ModelCheckpoint`` monitoring a metric keeps the best checkpoint separately).
Before ``last.ckpt`` is replaced, the previous one becomes ``last-1.ckpt`` (and ``last-1.ckpt`` becomes
``last-2.ckpt``, …): ``keep_latest`` resumable checkpoints are kept in all. The loggers are flushed before each save,
so the rows a checkpoint covers are on disk with it (a resumed run drops the rows logged after it).

**Atomic writes.** :class:`ranklit.training.SafeCheckpointIO` (installed on setup unless the trainer has a
``CheckpointIO`` of the user's own) writes every checkpoint of the trainer (these, ``interrupted.ckpt``, a
``ModelCheckpoint``'s) to a temporary file in the destination folder, ``fsync``s it, then renames it over the final
name: a full disk or a kill at any moment leaves either the previous file or the new one, never a partial file under
a final name, whatever ``$TMPDIR`` is. A temporary file left by a kill is removed when the next run of the folder
starts.

Worst-case work lost by a ``kill -9`` (no chance to save): the training since the newest of these saves, i.e. one
epoch with the default schedule, ``every_n_steps`` steps (plus the batch in progress) with it set.

Example:
    >>> import lightning as L
    >>> trainer = L.Trainer(callbacks=[RunCheckpoint("checkpoints", every_n_steps=500)], logger=False)
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Checkpoint
from typing_extensions import override

from ranklit._checks import check_positive_int
from ranklit._compat.lightning import checkpoint_batch_progress
from ranklit.training import SafeCheckpointIO, use_safe_checkpoint_io

__all__ = ["RunCheckpoint", "flush_loggers", "rotated_name"]


def rotated_name(age: int) -> str:
    """The file name of the resumable checkpoint ``age`` saves older than ``last.ckpt`` (``age`` 0: ``last.ckpt``).

    Example:
        >>> rotated_name(0), rotated_name(2)
        ('last.ckpt', 'last-2.ckpt')
    """
    return "last.ckpt" if age == 0 else f"last-{age}.ckpt"


def flush_loggers(trainer: L.Trainer) -> None:
    """Write the loggers' pending rows (``metrics.csv``) to disk, so they survive a kill with the checkpoint."""
    for logger in trainer.loggers:
        logger.save()


class RunCheckpoint(Checkpoint):
    """``last.ckpt`` at epoch ends and on this schedule (module docstring).

    Args:
        dirpath: the folder of the checkpoints (the ``ranklit`` CLI: the run directory's ``checkpoints/``).
        every_n_steps: save every N steps.
        every_minutes: save every M minutes.
        keep_latest: resumable checkpoints kept.
    """

    def __init__(
        self,
        dirpath: str | Path,
        every_n_steps: int | None = None,
        every_minutes: float | None = None,
        keep_latest: int = 2,
    ) -> None:
        for name, value in (("every_n_steps", every_n_steps), ("keep_latest", keep_latest)):
            if value is not None:
                check_positive_int(f"checkpoint.{name}", value)
        if every_minutes is not None and not every_minutes > 0:
            raise ValueError(f"`checkpoint.every_minutes` must be a positive number of minutes, got {every_minutes!r}.")
        self.dirpath = Path(dirpath)
        self.every_n_steps, self.every_minutes, self.keep_latest = every_n_steps, every_minutes, keep_latest
        self._saved_step: int | None = None
        self._saved_at = time.monotonic()
        self._between_batches = False

    @property
    def last_path(self) -> Path:
        """The newest resumable checkpoint written by this callback."""
        return self.dirpath / rotated_name(0)

    @override
    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        use_safe_checkpoint_io(trainer)
        if trainer.is_global_zero and self.dirpath.is_dir():
            # a kill during a write: never a checkpoint
            for leftover in self.dirpath.glob(f".*{SafeCheckpointIO.TEMPORARY_INFIX}*"):
                leftover.unlink(missing_ok=True)

    @override
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._saved_step, self._saved_at = trainer.global_step, time.monotonic()

    @override
    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if batch_idx == 0 or trainer.global_step == self._saved_step:
            return  # an epoch's start follows its predecessor's end, which was saved
        due = self.every_n_steps is not None and trainer.global_step % self.every_n_steps == 0
        if self.every_minutes is not None:  # rank 0's clock decides for all
            due |= bool(trainer.strategy.broadcast(time.monotonic() - self._saved_at >= 60 * self.every_minutes))
        if due:
            self._between_batches = True
            try:
                self.save(trainer)
            finally:
                self._between_batches = False

    @override
    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        if not self._between_batches:
            return
        # Lightning has fetched the next batch ("ready"): without it, the checkpoint is the one it would write at the
        # end of the previous batch, which it resumes from without counting that batch's logger step twice
        progress = checkpoint_batch_progress(checkpoint)
        for counts in (progress["total"], progress["current"]):
            counts["ready"] = counts["started"]
        progress["is_last_batch"] = False

    @override
    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.save(trainer)

    def save(self, trainer: L.Trainer) -> None:
        """Rotate the resumable checkpoints and write ``last.ckpt`` (on every process: a collective under DDP)."""
        if getattr(trainer, "fast_dev_run", False):
            return  # a smoke test writes no checkpoint (as Lightning's ModelCheckpoint)
        if trainer.is_global_zero:
            for age in range(self.keep_latest - 1, 0, -1):
                older, newer = self.dirpath / rotated_name(age), self.dirpath / rotated_name(age - 1)
                if newer.is_file():
                    os.replace(newer, older)
        flush_loggers(trainer)
        trainer.save_checkpoint(self.last_path, weights_only=False)
        self._saved_step, self._saved_at = trainer.global_step, time.monotonic()
