"""Every use of a private or undocumented API of Lightning, torchmetrics and torch's DDP, in one place.

Each function below names what it reaches into and the versions it was checked against: the range that
``pyproject.toml`` allows and ``.ci/run`` tests (oldest and newest), Lightning 2.5.5 and 2.6.6, torchmetrics 1.3.1
and 1.9.0, torch 2.14.1. Everywhere else ranklit uses public API only (``tests/test_compat.py`` checks that no other
module reads or writes a private attribute of a Lightning or torchmetrics object). When a new release moves one of
these, this file is the one to change.

This module imports neither Lightning nor torchmetrics, so ``ranklit.metrics`` and ``ranklit.losses`` stay importable
without them.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

__all__ = [
    "attached_trainer",
    "batch_progress",
    "metric_is_synced",
    "skip_ddp_gradient_sync",
    "synced_states",
    "training_data_fetcher",
]


def metric_is_synced(metric: Any) -> bool:
    """Whether a ``torchmetrics.Metric`` is inside ``compute()`` with its states gathered from every process.

    torchmetrics sets ``Metric._is_synced`` while ``compute()`` runs on synchronised states (checked: 1.3.1, 1.9.0);
    no public property tells it.
    """
    return bool(metric._is_synced)


def synced_states(metric: Any) -> AbstractContextManager[None]:
    """A context in which a ``torchmetrics.Metric``'s states are gathered from every process, as inside
    ``compute()``, for a method other than ``compute`` that needs them.

    ``Metric.sync_context`` is public, but the flags ``compute()`` passes it (``_to_sync``, ``_should_unsync``) are
    not (checked: torchmetrics 1.3.1, 1.9.0).
    """
    return metric.sync_context(
        dist_sync_fn=metric.dist_sync_fn, should_sync=metric._to_sync, should_unsync=metric._should_unsync
    )


def attached_trainer(module: Any) -> Any:
    """The ``Trainer`` a ``LightningModule`` is attached to, or ``None`` (``module.trainer`` raises when detached).

    Reads ``LightningModule._trainer`` (checked: Lightning 2.5.5, 2.6.6).
    """
    return module._trainer


def batch_progress(trainer: Any) -> Any:
    """The training epoch's batch counters (``.ready``, ``.started``, ``.processed``, ``.completed``).

    ``trainer.fit_loop.epoch_loop.batch_progress.current``: loop internals with no public accessor and no stability
    promise (checked: Lightning 2.5.5, 2.6.6).
    """
    return trainer.fit_loop.epoch_loop.batch_progress.current


def training_data_fetcher(trainer: Any) -> Any:
    """Lightning's training iterator of the running epoch (``trainer.fit_loop._data_fetcher``; checked: Lightning
    2.5.5, 2.6.6), created before ``on_train_start``."""
    return trainer.fit_loop._data_fetcher


def skip_ddp_gradient_sync(model: Any) -> None:
    """Stop ``DistributedDataParallel`` from all-reducing gradients in ``backward`` (the caller reduces them).

    Sets ``DistributedDataParallel.require_backward_grad_sync``, the flag ``no_sync()`` toggles, for good rather
    than for one ``with`` block (checked: torch 2.14.1).
    """
    model.require_backward_grad_sync = False
