"""One writer per run: ``run.lock`` in the run directory names the process that trains it.

The lock is a lock file of :mod:`ranklit._locks` (created atomically; host, PID and that PID's start time; a stale one
taken over with a line on stderr); a live holder raises :class:`RunLocked`, before the caller has changed anything
in the folder.

The ``ranklit`` command takes the lock of the run it resumes as soon as it has found it (before anything writes into
the folder) and of a new run when its trainer is built, on the process that will be global rank 0 (Lightning's DDP
launcher re-runs the command in its children, and ``torchrun`` starts every rank: those set ``LOCAL_RANK``/``RANK``
and take no lock), and releases it when the command ends, however it ends short of a ``kill -9`` (then the lock is
stale). :class:`RunLock` does the same for a trainer built in Python, during ``fit``.

Example:
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> acquire(folder); lock_holder(folder) is None  # this process holds it: nobody else
    True
    >>> release(folder); (folder / LOCK_FILE).exists()
    False
"""

from __future__ import annotations

from pathlib import Path

import lightning as L
from lightning.pytorch.callbacks import Callback
from typing_extensions import override

from ranklit._locks import holder, put_back, release_all, sibling_lock, start_time, take
from ranklit._locks import release as release_lock

__all__ = ["LOCK_FILE", "RunLock", "RunLocked", "acquire", "lock_holder", "lock_output", "put_back", "release",
           "release_all", "start_time"]

LOCK_FILE = "run.lock"


class RunLocked(RuntimeError):
    """Another live process holds a lock: trains the same run directory, or writes the same output folder."""


def lock_holder(folder: str | Path) -> str | None:
    """``"process <pid> on <host> (since <time>)"`` when a live process other than this one holds the lock of the
    run directory ``folder``, else ``None`` (no lock, a damaged or stale one, or this process's)."""
    return holder(Path(folder) / LOCK_FILE)


def acquire(folder: str | Path) -> tuple[bytes, int] | None:
    """Take the lock of the run directory ``folder`` (created if absent) for this process, taking over a stale
    lock with a line on stderr; raise :class:`RunLocked` naming a live holder. A no-op if this process holds it.

    Returns:
        The contents and modification time (ns) of the stale lock taken over, if any (a refused resume puts it back).
    """

    def busy(who: str) -> RunLocked:
        return RunLocked(f"{folder} is being trained by {who}: wait for it or stop it, then resume.")

    return take(Path(folder) / LOCK_FILE, busy)


def lock_output(folder: str | Path, command: str) -> None:
    """Take the lock of the output folder ``folder`` of ``command`` (``ranklit index``, ``ranklit predict``): the
    file ``.<name>.lock`` beside it (:func:`ranklit._locks.sibling_lock`); raise :class:`RunLocked` naming the live
    process that writes it. Released with the command's other locks (:func:`release_all`)."""

    def busy(who: str) -> RunLocked:
        return RunLocked(f"{folder} is being written by {who} (`{command}`): wait for it to finish or stop it, "
                         "then run the command again.")

    take(sibling_lock(folder), busy)


def release(folder: str | Path) -> None:
    """Remove the lock of ``folder`` if this process holds it."""
    release_lock(Path(folder) / LOCK_FILE)


class RunLock(Callback):
    """Holds ``<folder>/run.lock`` during ``fit`` on global rank 0 (module docstring); raises :class:`RunLocked`
    naming the live process that holds it."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    @override
    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if stage != "fit" or not trainer.is_global_zero or getattr(trainer, "fast_dev_run", False):
            return  # a smoke test (`fast_dev_run`) writes nothing into a run folder
        acquire(self.folder)

    def release(self) -> None:
        """Remove the lock if this process holds it."""
        release(self.folder)

    @override
    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if stage == "fit":
            self.release()

    @override
    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self.release()
