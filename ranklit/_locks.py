"""One process at a time: a lock file naming the process that holds it (a run folder, a prepared dataset root, an
index or predictions folder). Standard library only, so that every layer may use it.

:func:`take` creates the lock atomically (the holder's line is written to a temporary file, then hard-linked to the
lock's name, which fails if the name exists: of two processes that try at once exactly one gets it, and the lock is
never seen half-written). The holder is named by host, PID and the start time of that PID (Linux: field 22 of
``/proc/<pid>/stat``, clock ticks since boot), so a PID reused by another process after a ``kill -9`` is recognised.
A lock is **stale** when its process is gone, when its PID now belongs to a process started at another time, or when
it names another machine (a requeued job lands on another node, which cannot tell whether that process still runs:
taken over with a warning). A stale lock is taken over with a line on stderr; the take-over is itself serialised by
an exclusive ``<lock>.takeover`` file, which names its process too: one left by a killed process is removed at once
(or, where its process cannot be checked, after 60 s), and a take-over that cannot finish names the file, its age
and its process. A take-over lasts milliseconds and its file appears complete (a hard link), so one that cannot be
dated or named is judged by how long it stays unchanged instead: dated in the future (the clocks of two machines
disagree: its age would be negative), empty (a process died while writing it, on a file system without hard links)
or unreadable, it is removed with a line once it has stayed :data:`UNCHANGED_S` unchanged; an age is never printed
negative. A lock file that is empty or unreadable is taken over, and the line says which. A live holder makes
:func:`take` raise the caller's exception, before the caller changed anything.

Every lock this process holds is released by :func:`release_all` (at the end of a ``ranklit`` command, and at
interpreter exit), however the command ends short of a ``kill -9`` (then the lock is stale).

Example:
    >>> import tempfile
    >>> lock = Path(tempfile.mkdtemp()) / "run.lock"
    >>> take(lock, RuntimeError); holder(lock) is None  # this process holds it: nobody else
    True
    >>> release(lock); lock.exists()
    False
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ranklit.errors import UserError

__all__ = [
    "LockCopied",
    "LockStuck",
    "holder",
    "put_back",
    "release",
    "release_all",
    "sibling_lock",
    "start_time",
    "take",
]

TAKEOVER_STALE_S = 60.0  # a take-over file older than this was left by a killed process
UNCHANGED_S = 1.0  # an undatable or unreadable take-over file unchanged this long was left by a killed process
_held: set[Path] = set()  # the locks this process holds (resolved paths)


class LockCopied(UserError):
    """A live lock that names another path: it was copied with its folder (``cp -r`` of a live run); the message
    says so and that deleting the copy's lock lets the copy go on."""


class LockStuck(UserError):
    """A lock that could not be taken although nobody holds it: its take-over never finished (the message names the
    take-over file, its age and its process)."""


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


def sibling_lock(folder: str | Path) -> Path:
    """The lock of an output folder, beside it (``out/`` -> ``.out.lock``): inside, it would make a new folder
    look non-empty and would move with the folder.

    Example:
        >>> sibling_lock("indexes/shop")
        PosixPath('indexes/.shop.lock')
    """
    folder = Path(folder)
    return folder.parent / f".{folder.name}.lock"


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
        return _parse(path.read_text(errors="replace"))
    except OSError:
        return None


def _parse(text: str) -> dict[str, Any] | None:
    try:
        found = json.loads(text)
        found["pid"], found["host"] = int(found["pid"]), str(found["host"])
    except (ValueError, KeyError, TypeError):
        return None
    return found if isinstance(found, dict) else None


def _damage(path: Path) -> str:
    """What is wrong with the lock or take-over file ``path`` that :func:`_read` cannot read.

    Example:
        >>> import tempfile
        >>> empty = Path(tempfile.mkdtemp()) / "run.lock"; empty.touch(); _damage(empty)
        'it is empty (left by a process that died while writing it)'
    """
    try:
        text = path.read_text(errors="replace")
    except OSError as error:
        return f"it cannot be read ({error.strerror})"
    if not text.strip():
        return "it is empty (left by a process that died while writing it)"
    return "it is damaged (not a lock file ranklit wrote)"


def _age_text(age: float) -> str:
    """An age in words, never negative: a file dated in the future says that the clocks disagree.

    Example:
        >>> _age_text(12.4), _age_text(-86376.0)
        ('12 s old', 'dated 86376 s in the future (the clocks of two machines disagree)')
    """
    return f"{age:.0f} s old" if age >= 0 else f"dated {-age:.0f} s in the future (the clocks of two machines disagree)"


def _describe(found: dict[str, Any]) -> str:
    return f"process {found['pid']} on {found['host']} (since {found.get('since', '?')})"


def _stale_reason(found: dict[str, Any]) -> str | None:
    """Why the lock of ``found`` is stale, ``None`` while its process runs (module docstring)."""
    pid, host = found["pid"], found["host"]
    if host != socket.gethostname():
        return f"it names a process of {host}, which this machine cannot check (stop it if it still runs)"
    if not _alive(pid):
        return "that process no longer runs"
    recorded, now = found.get("started"), start_time(pid)
    if recorded is not None and now is not None and str(recorded) != now:
        return f"PID {pid} now belongs to another process (started at tick {now}, not {recorded})"
    return None


def _is_me(found: dict[str, Any]) -> bool:
    return found["pid"] == os.getpid() and found.get("started") == start_time(os.getpid())


def _me(path: Path) -> str:
    me = {"pid": os.getpid(), "host": socket.gethostname(), "started": start_time(os.getpid()),
          "since": time.strftime("%Y-%m-%d %H:%M:%S"), "path": str(path.resolve())}
    return json.dumps(me) + "\n"


def holder(path: str | Path) -> str | None:
    """``"process <pid> on <host> (since <time>)"`` when a live process other than this one holds the lock ``path``,
    else ``None`` (no lock, a damaged or stale one, or this process's)."""
    found = _read(Path(path))
    if found is None or _stale_reason(found) is not None:
        return None
    if found["pid"] == os.getpid() and found.get("started") in (None, start_time(os.getpid())):
        return None
    return _describe(found)


def take(path: str | Path, busy: Callable[[str], BaseException]) -> tuple[bytes, int] | None:
    """Take the lock ``path`` (its folder is created if absent) for this process, taking over a stale lock with a
    line on stderr; raise ``busy(<the live holder, described>)`` while another process holds it, and
    :class:`LockStuck` when a take-over never finishes. A no-op if this process holds it.

    Returns:
        The contents and modification time (ns) of the stale lock taken over, if any (a refusal puts it back:
        :func:`put_back`).
    """
    path = Path(path)
    if path.resolve() in _held:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    text, taken_over = _me(path), None
    seen: dict[tuple[int, int, int], float] = {}  # each take-over file looked at: when first seen (monotonic)
    for _ in range(100):  # each turn either takes the lock, refuses, or removes a stale one (bounded by races)
        if _create(path, text):
            _held.add(path.resolve())
            return taken_over
        found = _read(path)
        if found is not None and _is_me(found):
            _held.add(path.resolve())  # this process's own lock (taken through another spelling of the path)
            return None
        reason = _damage(path) if found is None else _stale_reason(found)
        if found is not None and reason is None:
            copied = found.get("path")
            if isinstance(copied, str) and copied != str(path.resolve()):
                raise LockCopied(
                    f"{path} was copied from {copied}, which {_describe(found)} holds: the copied lock names that "
                    f"process, not one working in {path.parent}. If {path.parent} is a copy to use on its own, "
                    f"delete {path} and run the command again."
                )
            raise busy(_describe(found))
        taken_over = _remove_stale(path, reason or "", seen) or taken_over
    raise LockStuck(_stuck_takeover(path))


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


def _takeover_file(path: Path) -> Path:
    return path.with_name(f"{path.name}.takeover")


def _age(path: Path) -> float | None:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return None


def _left_behind(guard: Path, seen: dict[tuple[int, int, int], float]) -> str | None:
    """Why the take-over file ``guard`` was left behind (module docstring), ``None`` while a take-over may be under
    way: its process is gone (or its PID reused); where that cannot be checked (another machine, a damaged file),
    it is older than :data:`TAKEOVER_STALE_S`, or it cannot be dated (in the future) or read and has stayed
    :data:`UNCHANGED_S` unchanged (``seen``: when each version was first looked at)."""
    try:
        status, text = guard.stat(), guard.read_text(errors="replace")
    except OSError:
        return None  # gone meanwhile: look again
    found = _parse(text)
    if found is not None and found["host"] == socket.gethostname():
        return None if _stale_reason(found) is None else "left by a process that no longer runs"
    age = time.time() - status.st_mtime
    what = _damage(guard) if found is None else f"it names {_describe(found)}, which this machine cannot check"
    if age > TAKEOVER_STALE_S:
        return f"{what}, and it is {age:.0f} s old: left by a process that no longer takes the lock over"
    first = seen.setdefault((status.st_ino, status.st_mtime_ns, status.st_size), time.monotonic())
    if (found is None or age < 0) and time.monotonic() - first >= UNCHANGED_S:
        return f"{what}; {_age_text(age)} and unchanged for {UNCHANGED_S:.0f} s: left by a process that no longer runs"
    return None


def _stuck_takeover(path: Path) -> str:
    """Who keeps the take-over of ``path`` from finishing: the take-over file, its age and its process."""
    guard = _takeover_file(path)
    found, age = _read(guard), _age(guard)
    if age is None:
        return f"{path}: could not take the lock (other processes kept taking it over); try again."
    who = f"is held by {_describe(found)}" if found is not None else f"is unreadable: {_damage(guard)}"
    return (
        f"{path}: could not take the lock: {guard} ({_age_text(age)}) {who}, taking the lock over; if no "
        f"such process runs, remove {guard} and try again."
    )


def _remove_stale(path: Path, reason: str, seen: dict[tuple[int, int, int], float]) -> tuple[bytes, int] | None:
    """Remove the stale lock ``path`` unless another process replaced it meanwhile (serialised by the take-over
    file; ``seen``: :func:`_left_behind`); its contents and modification time when removed."""
    guard = _takeover_file(path)
    if not _create(guard, _me(guard)):
        if why := _left_behind(guard, seen):
            guard.unlink(missing_ok=True)
            sys.stderr.write(f"Removed {guard}, {why}.\n")
        else:
            time.sleep(0.05)  # another process is taking over: look again
        return None
    try:
        found = _read(path)
        now = _damage(path) if found is None else _stale_reason(found)
        if not path.is_file() or now != reason:
            return None  # not the lock looked at: one taken since
        removed = path.read_bytes(), path.stat().st_mtime_ns
        path.unlink()
        who = "an unreadable lock" if found is None else _describe(found)
        sys.stderr.write(f"Taking over {path} from {who}: {reason}.\n")
        return removed
    finally:
        guard.unlink(missing_ok=True)


def put_back(path: str | Path, contents: bytes, mtime_ns: int) -> None:
    """Write back the stale lock ``path`` taken over (``contents``, modification time ``mtime_ns``), unless a lock
    is there again (another process's)."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_bytes(contents)
    os.utime(temporary, ns=(mtime_ns, mtime_ns))
    try:
        os.link(temporary, path)
    except FileExistsError:
        pass
    except OSError:  # a file system without hard links
        if not path.exists():
            os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def release(path: str | Path) -> None:
    """Remove the lock ``path`` if this process holds it."""
    path = Path(path).resolve()
    if path in _held:
        _held.discard(path)
        found = _read(path)
        if found is not None and _is_me(found):
            path.unlink(missing_ok=True)


def release_all() -> None:
    """Remove every lock this process holds (the end of a command; also run at interpreter exit)."""
    for path in list(_held):
        release(path)


atexit.register(release_all)
