"""One writer per run: ``run.lock`` in the run directory names the process that trains it.

:class:`RunLock` creates the lock when ``fit`` starts (on global rank 0) and removes it when it ends, however it
ends short of a ``kill -9``. A second ``fit`` of the same run directory (two ``--resume true`` at once) is refused
by :func:`lock_holder` while the process named in the lock is alive on this machine; a lock left by a killed
process, or by a process of another machine (a requeued job lands on another node, where this machine cannot tell
whether it still runs), is taken over, the latter with a warning.

Example:
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> lock_holder(folder) is None
    True
"""

from __future__ import annotations

import json
import os
import socket
import time
import warnings
from pathlib import Path

import lightning as L
from lightning.pytorch.callbacks import Callback
from typing_extensions import override

__all__ = ["LOCK_FILE", "RunLock", "RunLocked", "lock_holder"]

LOCK_FILE = "run.lock"


class RunLocked(RuntimeError):
    """Another live process trains the same run directory."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lock_holder(folder: str | Path) -> str | None:
    """``"process <pid> on <host> (since <time>)"`` when a live process other than this one holds the lock of the
    run directory ``folder``, else ``None`` (no lock, a stale one, or one of another machine: warned about)."""
    path = Path(folder) / LOCK_FILE
    try:
        holder = json.loads(path.read_text())
        pid, host = int(holder["pid"]), str(holder["host"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # no lock, or a damaged one: nobody to name
    if host != socket.gethostname():
        warnings.warn(
            f"{path} names process {pid} on {host}, which this machine cannot check: taking the run over (stop that "
            "process if it still trains this run).",
            stacklevel=2,
        )
        return None
    if pid == os.getpid() or not _alive(pid):
        return None
    return f"process {pid} on {host} (since {holder.get('since', '?')})"


class RunLock(Callback):
    """Holds ``<folder>/run.lock`` during ``fit`` (module docstring); raises :class:`RunLocked` naming the live
    process that holds it."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self._held = False

    @override
    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if stage != "fit" or not trainer.is_global_zero or self._held or getattr(trainer, "fast_dev_run", False):
            return  # a smoke test (`fast_dev_run`) writes nothing into a run folder
        if holder := lock_holder(self.folder):
            raise RunLocked(f"{self.folder} is being trained by {holder}: wait for it or stop it, then resume.")
        self.folder.mkdir(parents=True, exist_ok=True)
        since = time.strftime("%Y-%m-%d %H:%M:%S")
        text = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": since})
        (self.folder / LOCK_FILE).write_text(text + "\n")
        self._held = True

    def release(self) -> None:
        """Remove the lock if this process holds it."""
        if self._held:
            (self.folder / LOCK_FILE).unlink(missing_ok=True)
            self._held = False

    @override
    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if stage == "fit":
            self.release()

    @override
    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self.release()
