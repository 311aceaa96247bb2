"""``--trainer.enable_checkpointing false``: a run that writes no checkpoint, with any config.

Lightning refuses ``enable_checkpointing=False`` next to a ``ModelCheckpoint`` in ``trainer.callbacks``, and every
shipped experiment config has one (its best checkpoint). The ``ranklit`` command reads the flag as the user's intent:
the config's ``ModelCheckpoint`` callbacks are left out (one line on stderr names them), and the run writes no
checkpoint at all, neither ``last.ckpt`` (:class:`ranklit.callbacks.RunCheckpoint`) nor ``interrupted.ckpt``
(:class:`ranklit.callbacks.FaultTolerance`), so it cannot be resumed. With ``--resume true`` it still continues
the run from that run's checkpoint (reading one is not writing one) and logs into the same folder; a later
``--resume`` continues from the same checkpoint again, dropping the rows logged after it.

Example:
    >>> from jsonargparse import Namespace
    >>> trainer = Namespace(enable_checkpointing=False, callbacks=[
    ...     Namespace(class_path="lightning.pytorch.callbacks.ModelCheckpoint", init_args=Namespace()),
    ...     Namespace(class_path="lightning.pytorch.callbacks.LearningRateMonitor", init_args=Namespace())])
    >>> drop_checkpoint_callbacks(trainer)
    ['lightning.pytorch.callbacks.ModelCheckpoint']
    >>> [c.class_path for c in trainer.callbacks]
    ['lightning.pytorch.callbacks.LearningRateMonitor']
"""

from __future__ import annotations

import importlib
from typing import Any

from lightning.pytorch.callbacks import Checkpoint

__all__ = ["drop_checkpoint_callbacks"]


def _is_checkpoint(class_path: str) -> bool:
    module, _, name = class_path.rpartition(".")
    try:
        return issubclass(getattr(importlib.import_module(module), name), Checkpoint)
    except (ImportError, AttributeError, TypeError, ValueError):
        return False  # not a class ranklit can find: Lightning's own parse names it


def drop_checkpoint_callbacks(trainer: Any) -> list[str]:
    """Remove the checkpoint callbacks (``ModelCheckpoint`` and other ``Checkpoint`` classes) from the parsed
    ``trainer`` settings when ``enable_checkpointing`` is false; their class paths (none otherwise)."""
    callbacks = trainer.get("callbacks")
    if trainer.get("enable_checkpointing") is not False or not isinstance(callbacks, list):
        return []
    kept = [c for c in callbacks if not _is_checkpoint(str(getattr(c, "class_path", "")))]
    trainer.callbacks = kept
    return [str(c.class_path) for c in callbacks if all(c is not k for k in kept)]
