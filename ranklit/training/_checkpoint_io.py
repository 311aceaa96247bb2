"""The one checkpoint I/O of a ranklit trainer: loads weights only (:mod:`ranklit._checkpoint`) and writes atomically.

**Loads.** A ``Trainer`` restores a ``ckpt_path`` with its strategy's ``checkpoint_io.load_checkpoint`` (Lightning's
public ``CheckpointIO`` plugin API), which unpickles the whole file up to Lightning 2.5.x and loads it with torch's
default from 2.6 (``weights_only=None``, turned off by ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD``). :class:`SafeCheckpointIO`
loads weights only whatever is asked. Checked with Lightning 2.5.5 (``load_checkpoint(path, map_location)``) and
2.6.6 (``..., weights_only``).

**Writes.** Every checkpoint the trainer writes (``last.ckpt`` of :class:`ranklit.callbacks.RunCheckpoint`,
``interrupted.ckpt`` of :class:`ranklit.callbacks.FaultTolerance`, a ``ModelCheckpoint``'s ``best-*.ckpt``) goes to
a temporary file ``.<name>.tmp-<pid>`` in the destination folder, is flushed and ``fsync``'d, then renamed over the
final name (``os.replace``), and the folder is ``fsync``'d (the rename reaches the disk). A full disk or a kill at
any moment leaves either the previous file or the new one under the final name, never a partial one; a failed write
removes its temporary file (one left by a kill is removed when the next run of the folder starts). Lightning's own
writer goes through a temporary file in ``$TMPDIR`` and ``shutil.move``: a plain copy into the final name when
``$TMPDIR`` is on another file system than the run (the usual cluster set-up), which a full disk or a kill leaves
truncated. Remote (``fsspec``) paths are left to Lightning's writer.

The ``ranklit`` command and ranklit's checkpoint callbacks install it on every trainer whose strategy has Lightning's
default ``TorchCheckpointIO`` (:func:`use_safe_checkpoint_io`); a ``CheckpointIO`` of the user's own
(``trainer.plugins``) is kept.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins import TorchCheckpointIO
from lightning.fabric.utilities.cloud_io import get_filesystem
from lightning.pytorch import Trainer

from ranklit._checkpoint import load_checkpoint

__all__ = ["SafeCheckpointIO", "use_safe_checkpoint_io"]


def _fsync_folder(folder: Path) -> None:
    """``fsync`` a folder: the renames and removals in it reach the disk."""
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


class SafeCheckpointIO(TorchCheckpointIO):
    """``TorchCheckpointIO`` that loads weights only and writes atomically (module docstring)."""

    #: The infix of the temporary files of :meth:`save_checkpoint`: ``.last.ckpt.tmp-<pid>``.
    TEMPORARY_INFIX = ".tmp-"

    def load_checkpoint(self, path: Any, map_location: Any = None, weights_only: bool | None = None) -> dict[str, Any]:
        """The checkpoint at ``path``, by :func:`ranklit._checkpoint.load_checkpoint` (``weights_only`` ignored)."""
        checkpoint: dict[str, Any] = load_checkpoint(path, map_location=map_location or "cpu")
        return checkpoint

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None) -> None:
        """Write ``checkpoint`` to ``path``: temporary file beside it, ``fsync``, rename, ``fsync`` of the folder.

        Example:
            >>> import tempfile
            >>> path = Path(tempfile.mkdtemp()) / "last.ckpt"
            >>> SafeCheckpointIO().save_checkpoint({"w": torch.ones(2)}, path)
            >>> SafeCheckpointIO().load_checkpoint(path)["w"], [p.name for p in path.parent.iterdir()]
            (tensor([1., 1.]), ['last.ckpt'])
        """
        if storage_options is not None or type(get_filesystem(path)).__name__ != "LocalFileSystem":
            super().save_checkpoint(checkpoint, path, storage_options)  # refuses storage_options, as Lightning's
            return
        final = Path(path)
        final.parent.mkdir(parents=True, exist_ok=True)
        temporary = final.parent / f".{final.name}{self.TEMPORARY_INFIX}{os.getpid()}"
        try:
            with temporary.open("wb") as file:
                torch.save(checkpoint, file)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, final)
        finally:
            temporary.unlink(missing_ok=True)  # a failed write (full disk, an unpicklable value) leaves nothing
        _fsync_folder(final.parent)


def use_safe_checkpoint_io(trainer: Trainer) -> None:
    """Give ``trainer``'s strategy a :class:`SafeCheckpointIO` if it has Lightning's default ``TorchCheckpointIO``."""
    if type(trainer.strategy.checkpoint_io) is TorchCheckpointIO:
        trainer.strategy.checkpoint_io = SafeCheckpointIO()
