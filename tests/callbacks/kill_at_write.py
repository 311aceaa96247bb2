"""A callback that kills its process (``SIGKILL``) while a checkpoint file is being written into a folder.

An audit hook (:func:`sys.addaudithook`) sees every ``open`` for writing made from Python (``open``, ``io.open``,
``Path.open``, ``os.open``: the writers of ranklit, Lightning, fsspec and ``shutil``'s copy alike); at the ``nth``
(1-based) that opens a file of ``folder`` whose name holds ``name`` (``"last.ckpt"``, ``"best-"``,
``"interrupted.ckpt"``: a final name or a temporary one such as ``.last.ckpt.tmp-<pid>``), a thread kills the
process as soon as that file exists (the hook runs before the file is created): what a ``kill -9`` in the middle of
that write leaves behind. Every checkpoint gets ``padding_mb`` MiB of zeros (a ``padding`` entry, which Lightning
ignores on a resume) so that the write lasts long enough to be caught. Test-only: the tests pass it with
``--trainer.callbacks+=``.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback
from typing_extensions import override

_WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND


def _kill_once_created(path: Path, seconds: float = 60) -> None:
    """``SIGKILL`` this process as soon as ``path`` exists (within ``seconds``)."""
    deadline = time.monotonic() + seconds
    while not os.path.lexists(path) and time.monotonic() < deadline:
        time.sleep(0.0001)
    os.kill(os.getpid(), signal.SIGKILL)


class KillAtWrite(Callback):
    """``SIGKILL`` at the ``nth`` opening for writing of a file of ``folder`` named like ``name`` (module docstring).

    Args:
        folder: the folder (relative to the working directory), e.g. the run's ``checkpoints/``.
        name: a part of the file name.
        nth: which such opening kills.
        padding_mb: the zeros added to every checkpoint.
    """

    def __init__(self, folder: str, name: str, nth: int = 1, padding_mb: int = 32) -> None:
        self.folder, self.name, self.nth, self.padding_mb = folder, name, nth, padding_mb
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
            threading.Thread(target=_kill_once_created, args=(path,), daemon=True).start()

    @override
    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        checkpoint["padding"] = torch.zeros(self.padding_mb * 2**18)  # 4-byte floats

    @override
    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if not self._installed:  # an audit hook cannot be removed: one for the process
            sys.addaudithook(self._hook)
            self._installed = True
