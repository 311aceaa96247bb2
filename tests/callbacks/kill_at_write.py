"""A callback that kills its process (``SIGKILL``) the moment a checkpoint file starts being written into a folder.

An audit hook (:func:`sys.addaudithook`) sees every ``open`` for writing made from Python (``open``, ``io.open``,
``Path.open``, ``os.open``: the writers of ranklit, Lightning, fsspec and ``shutil``'s copy alike); the
``nth`` (1-based) that opens a file of ``folder`` whose name holds ``name`` (``"last.ckpt"``, ``"best-"``,
``"interrupted.ckpt"``: a final name or a temporary one such as ``.last.ckpt.tmp-<pid>``) kills the process at once,
before a byte is written: what a ``kill -9`` in the middle of that write leaves behind. Test-only: the tests pass it
with ``--trainer.callbacks+=``.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback
from typing_extensions import override

_WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND


class KillAtWrite(Callback):
    """``SIGKILL`` at the ``nth`` opening for writing of a file of ``folder`` named like ``name`` (module docstring).

    Args:
        folder: the folder (relative to the working directory), e.g. the run's ``checkpoints/``.
        name: a part of the file name.
        nth: which such opening kills.
    """

    def __init__(self, folder: str, name: str, nth: int = 1) -> None:
        self.folder, self.name, self.nth = folder, name, nth
        self._seen = 0
        self._installed = False

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if event != "open" or not isinstance(args[0], (str, os.PathLike)):
            return
        path, mode, flags = Path(args[0]), args[1], args[2]
        writing = any(c in mode for c in "wxa+") if isinstance(mode, str) else bool((flags or 0) & _WRITING)
        if not writing or self.name not in path.name:
            return
        if os.path.abspath(path.parent) != os.path.abspath(self.folder):
            return
        self._seen += 1
        if self._seen == self.nth:
            os.kill(os.getpid(), signal.SIGKILL)

    @override
    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if not self._installed:  # an audit hook cannot be removed: one for the process
            sys.addaudithook(self._hook)
            self._installed = True
