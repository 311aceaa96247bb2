"""torchmetrics internals (checked: torchmetrics 1.3.1, 1.9.0). Imports nothing of Lightning or torchmetrics, so
``ranklit.metrics`` may use it without pulling Lightning in."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

__all__ = [
    "metric_is_synced",
    "synced_states",
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
