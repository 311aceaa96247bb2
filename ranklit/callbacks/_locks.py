"""One writer per run: ``run.lock`` in the run directory names the process that trains it.

:func:`acquire` creates the lock atomically (the holder's line is written to a temporary file, then hard-linked to
``run.lock``, which fails if the name exists: of two processes that try at once exactly one gets it, and the lock is
never seen half-written). The holder is named by host, PID and the start time of that PID (Linux: field 22 of
``/proc/<pid>/stat``, clock ticks since boot), so a PID reused by another process after a ``kill -9`` is recognised.
A lock is **stale** when its process is gone, when its PID now belongs to a process started at another time, or when
it names another machine (a requeued job lands on another node, which cannot tell whether that process still runs:
taken over with a warning). A stale lock is taken over with a line on stderr; the take-over is itself serialised by
an exclusive ``run.lock.takeover`` file, so that two processes finding the same stale lock never both win. A live
holder raises :class:`RunLocked`, before the caller has changed anything in the folder.

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

import atexit
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import Callback
from typing_extensions import override

__all__ = ["LOCK_FILE", "RunLock", "RunLocked", "acquire", "lock_holder", "release", "release_all"]

LOCK_FILE = "run.lock"
_TAKEOVER = "run.lock.takeover"  # held for the instant of a stale lock's removal
_TAKEOVER_STALE_S = 60.0  # a take-over file older than this was left by a killed process
_held: set[Path] = set()  # the run folders whose lock this process holds


class RunLocked(RuntimeError):
    """Another live process trains the same run directory."""


def start_time(pid: int) -> str | None:
    """When process ``pid`` started (field 22 of ``/proc/<pid>/stat``), ``None`` where that cannot be read (no such
    process, not Linux).

    Example:
        >>> start_time(os.getpid()) == start_time(os.getpid())
        True
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # the command name, in parentheses, may hold spaces
    return fields[19] if len(fields) > 19 else None  # fields[0] is field 3


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read(path: Path) -> dict[str, Any] | None:
    try:
        holder = json.loads(path.read_text())
        holder["pid"], holder["host"] = int(holder["pid"]), str(holder["host"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return holder


def _describe(holder: dict[str, Any]) -> str:
    return f"process {holder['pid']} on {holder['host']} (since {holder.get('since', '?')})"


def _stale_reason(holder: dict[str, Any]) -> str | None:
    """Why the lock of ``holder`` is stale, ``None`` while its process runs (module docstring)."""
    pid, host = holder["pid"], holder["host"]
    if host != socket.gethostname():
        return f"it names a process of {host}, which this machine cannot check (stop it if it still trains this run)"
    if not _alive(pid):
        return "that process no longer runs"
    recorded, now = holder.get("started"), start_time(pid)
    if recorded is not None and now is not None and str(recorded) != now:
        return f"PID {pid} now belongs to another process (started at tick {now}, not {recorded})"
    return None


def lock_holder(folder: str | Path) -> str | None:
    """``"process <pid> on <host> (since <time>)"`` when a live process other than this one holds the lock of the
    run directory ``folder``, else ``None`` (no lock, a damaged or stale one, or this process's)."""
    holder = _read(Path(folder) / LOCK_FILE)
    if holder is None or _stale_reason(holder) is not None:
        return None
    if holder["pid"] == os.getpid() and holder.get("started") in (None, start_time(os.getpid())):
        return None
    return _describe(holder)


def acquire(folder: str | Path) -> tuple[bytes, int] | None:
    """Take the lock of the run directory ``folder`` (created if absent) for this process, taking over a stale
    lock with a line on stderr; raise :class:`RunLocked` naming a live holder. A no-op if this process holds it.

    Returns:
        The contents and modification time (ns) of the stale lock taken over, if any (a refused resume puts it back).
    """
    folder = Path(folder)
    if folder.resolve() in _held:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_FILE
    me = {"pid": os.getpid(), "host": socket.gethostname(), "started": start_time(os.getpid()),
          "since": time.strftime("%Y-%m-%d %H:%M:%S"), "folder": str(folder.resolve())}  # fmt: skip
    taken_over = None
    for _ in range(100):  # each turn either takes the lock, refuses, or removes a stale one (bounded by races)
        if _create(path, json.dumps(me) + "\n"):
            _held.add(folder.resolve())
            return taken_over
        holder = _read(path)
        if holder is not None and _is_me(holder):
            _held.add(folder.resolve())  # this process's own lock (taken through another spelling of the path)
            return None
        reason = "it is damaged" if holder is None else _stale_reason(holder)
        if holder is not None and reason is None:
            raise RunLocked(_live_holder(folder, holder))
        taken_over = _remove_stale(path, reason or "") or taken_over
    raise RunLocked(f"{path}: could not take the lock (other processes keep taking it over); try again.")


def _create(path: Path, text: str) -> bool:
    """Create ``path`` holding ``text`` if it does not exist (atomically); ``False`` if it exists."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        with temporary.open("w") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        except OSError:  # a file system without hard links: an exclusive create (a reader may see it empty)
            try:
                descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                return False
            with os.fdopen(descriptor, "w") as file:
                file.write(text)
        return True
    finally:
        temporary.unlink(missing_ok=True)


def _live_holder(folder: Path, holder: dict[str, Any]) -> str:
    """The refusal for a live holder; a lock that names another folder was copied with the run (``cp -r`` of a live
    run): it says so, and that deleting the copy's lock lets the copy resume."""
    locked = holder.get("folder")
    if isinstance(locked, str) and locked != str(folder.resolve()):
        return (
            f"{folder / LOCK_FILE} was copied from {locked}, which {_describe(holder)} trains: the copied lock names "
            f"that run's process, not one training {folder}. If {folder} is a copy to resume on its own, delete "
            f"{folder / LOCK_FILE} and resume it."
        )
    return f"{folder} is being trained by {_describe(holder)}: wait for it or stop it, then resume."


def _is_me(holder: dict[str, Any]) -> bool:
    return holder["pid"] == os.getpid() and holder.get("started") == start_time(os.getpid())


def _remove_stale(path: Path, reason: str) -> tuple[bytes, int] | None:
    """Remove the stale lock ``path`` unless another process replaced it meanwhile (serialised by ``_TAKEOVER``);
    its contents and modification time when removed."""
    guard = path.with_name(_TAKEOVER)
    try:
        os.close(os.open(guard, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        try:
            if time.time() - guard.stat().st_mtime > _TAKEOVER_STALE_S:
                guard.unlink(missing_ok=True)
        except OSError:
            pass
        time.sleep(0.05)  # another process is taking over: look again
        return None
    try:
        holder = _read(path)
        now = "it is damaged" if holder is None else _stale_reason(holder)
        if not path.is_file() or now != reason:
            return None  # not the lock looked at: one taken since
        removed = path.read_bytes(), path.stat().st_mtime_ns
        path.unlink()
        who = "a damaged lock" if holder is None else _describe(holder)
        sys.stderr.write(f"Taking over {path} from {who}: {reason}.\n")
        return removed
    finally:
        guard.unlink(missing_ok=True)


def release(folder: str | Path) -> None:
    """Remove the lock of ``folder`` if this process holds it."""
    folder = Path(folder).resolve()
    if folder in _held:
        _held.discard(folder)
        holder = _read(folder / LOCK_FILE)
        if holder is not None and _is_me(holder):
            (folder / LOCK_FILE).unlink(missing_ok=True)


def release_all() -> None:
    """Remove every lock this process holds (the end of a command; also run at interpreter exit)."""
    for folder in list(_held):
        release(folder)


atexit.register(release_all)


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
