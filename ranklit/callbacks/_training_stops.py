"""``TrainingStops``: ``fit``'s stops by signal, whatever the checkpoint setting.

``SIGTERM``, Ctrl-C (``SIGINT``) and ``SIGUSR1`` go through :mod:`ranklit.training.stops`: the handler only records
the request (Lightning's own ``SIGTERM`` handler, which runs a collective inside the handler and may deadlock a DDP
run, is replaced), every process agrees on it at the end of each training batch and of each training epoch (one
``all_reduce`` of one integer), and Lightning stops after that batch; a request in an epoch's last batch or in a
validation lets the epoch finish. The ``ranklit`` command then exits with ``128 + signal`` (143, 130, 138).

:class:`ranklit.callbacks.FaultTolerance` stops at the same points and also saves ``interrupted.ckpt`` there; the
``ranklit`` command adds this callback instead when ``--trainer.enable_checkpointing false`` leaves the checkpoints
out, so that a stopped run never reports success (Lightning's handler would end it with exit code 0).

Example:
    >>> import lightning as L
    >>> trainer = L.Trainer(callbacks=[TrainingStops()], logger=False, enable_progress_bar=False)
"""

from __future__ import annotations

import lightning as L
from lightning.pytorch.callbacks import Callback
from typing_extensions import override

from ranklit._compat.lightning import batch_progress
from ranklit.training.stops import StopSignals, agree_to_stop, mark_stopped, record_stop

__all__ = ["TrainingStops", "agree_after_batch", "agree_after_epoch"]


def agree_after_batch(trainer: L.Trainer) -> None:
    """At the end of a training batch: agree on a stop (:func:`ranklit.training.stops.agree_to_stop`), unless the
    batch is the epoch's last one (then :func:`agree_after_epoch`) or the run's last step."""
    if not batch_progress(trainer).is_last_batch and not 0 <= trainer.max_steps <= trainer.global_step:
        agree_to_stop(trainer)


def agree_after_epoch(trainer: L.Trainer) -> None:
    """At the end of a training epoch (after its validation): agree on a stop, unless the run is finished (a finished
    run ends as finished; Lightning stops after the epoch's checkpoints are written)."""
    max_epochs, max_steps = trainer.max_epochs, trainer.max_steps
    last_epoch = max_epochs is not None and max_epochs >= 0 and trainer.current_epoch + 1 >= max_epochs
    if not last_epoch and not 0 <= max_steps <= trainer.global_step:
        agree_to_stop(trainer)


class TrainingStops(Callback):
    """Stops ``fit`` between two training batches on a signal, saving nothing (module docstring)."""

    @override
    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        StopSignals.install(trainer)  # before Lightning registers its handlers (for the baseline validation too)

    @override
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        mark_stopped(None)

    @override
    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: object, batch: object, batch_idx: int
    ) -> None:
        agree_after_batch(trainer)

    @override
    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        agree_after_epoch(trainer)

    @override
    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        record_stop(exception)
