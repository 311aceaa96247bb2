"""``EvaluationStops``: ``ranklit test`` and ``ranklit validate`` follow ``fit``'s signal contract.

``SIGTERM``, Ctrl-C (``SIGINT``) and ``SIGUSR1`` go through :mod:`ranklit.training.stops`, as in ``fit``: the
handler only records the request, all processes agree on it at the end of each evaluation batch (one ``all_reduce``
of one integer; the evaluation loaders give every rank as many batches), and Lightning stops after that batch. The
metrics are then never computed, so nothing is logged or printed as if the evaluation were complete, and the command
exits with ``128 + signal`` (143, 130, 138) instead of Lightning's 0 (``SIGTERM``) or 1 (Ctrl-C). A request during
the last batch lets the evaluation finish: its results are complete, and the exit code is 0. A second Ctrl-C stops
at once (exit code 130).

Example:
    >>> import lightning as L
    >>> trainer = L.Trainer(callbacks=[EvaluationStops()], logger=False, enable_progress_bar=False)
"""

from __future__ import annotations

from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback
from typing_extensions import override

from ranklit.training.stops import StopSignals, agree_to_stop, mark_stopped, record_stop

__all__ = ["EvaluationStops"]


class EvaluationStops(Callback):
    """Stops an evaluation (``validate``, ``test``) between two batches on a signal (module docstring)."""

    @override
    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        StopSignals.install(trainer)  # before Lightning registers its handlers
        mark_stopped(None)

    def _between_batches(self, trainer: L.Trainer) -> None:
        if not trainer.sanity_checking:
            agree_to_stop(trainer)  # Lightning raises SIGTERMException after this batch unless it is the last

    @override
    def on_validation_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._between_batches(trainer)

    @override
    def on_test_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._between_batches(trainer)

    @override
    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        record_stop(exception)
