"""Lightning's checkpoint loads (``trainer.fit/validate/test/predict(ckpt_path=...)``) through ranklit's weights-only
loader (:mod:`ranklit._checkpoint`).

A ``Trainer`` restores a ``ckpt_path`` with its strategy's ``checkpoint_io.load_checkpoint`` (Lightning's public
``CheckpointIO`` plugin API), which unpickles the whole file up to Lightning 2.5.x and loads it with torch's default
from 2.6 (``weights_only=None``, turned off by ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD``). :class:`SafeCheckpointIO` is
Lightning's ``TorchCheckpointIO`` whose loads are weights-only whatever is asked; the ``ranklit`` command installs it
on every trainer whose strategy has the default one (:func:`use_safe_checkpoint_io`); a ``CheckpointIO`` of the
user's own (``trainer.plugins``) is kept. Checked with Lightning 2.5.5 (``load_checkpoint(path, map_location)``) and
2.6.6 (``..., weights_only``).
"""

from __future__ import annotations

from typing import Any

from lightning.fabric.plugins import TorchCheckpointIO
from lightning.pytorch import Trainer

from ranklit._checkpoint import load_checkpoint

__all__ = ["SafeCheckpointIO", "use_safe_checkpoint_io"]


class SafeCheckpointIO(TorchCheckpointIO):
    """``TorchCheckpointIO`` that loads weights only (module docstring); saving is Lightning's."""

    def load_checkpoint(self, path: Any, map_location: Any = None, weights_only: bool | None = None) -> dict[str, Any]:
        """The checkpoint at ``path``, by :func:`ranklit._checkpoint.load_checkpoint` (``weights_only`` ignored)."""
        checkpoint: dict[str, Any] = load_checkpoint(path, map_location=map_location or "cpu")
        return checkpoint


def use_safe_checkpoint_io(trainer: Trainer) -> None:
    """Give ``trainer``'s strategy a :class:`SafeCheckpointIO` if it has Lightning's default ``TorchCheckpointIO``."""
    if type(trainer.strategy.checkpoint_io) is TorchCheckpointIO:
        trainer.strategy.checkpoint_io = SafeCheckpointIO()
