"""Resumable downloads with the standard library: HTTP ``Range``, retries with backoff, ``*.part`` files, digests.

:func:`download` writes ``<file>.part`` and renames it to ``<file>`` once complete. A connection that drops (or a
5xx answer, a timeout, a refused connection) is retried after 1, 2, 4, ... seconds (at most 30), each time asking
for the bytes still missing (``Range: bytes=<received>-``), so a drop costs only the bytes in flight; the count of
tries starts again whenever bytes arrive. A re-run of the command continues a ``.part`` left by an earlier one. A
server that ignores ``Range`` (answers 200) is read again from the start. Before the body is read, the free disk space
is checked against what the download and its unpacking need. 4xx answers are not retried: the error names the
address and the fix.
"""

from __future__ import annotations

import errno
import hashlib
import http.client
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from ranklit.errors import UserError

__all__ = ["ProgressBar", "check_space", "digests", "download", "human"]

BACKOFF_SECONDS = 1.0
"""The first wait before a retry; it doubles after each failed try, up to :data:`BACKOFF_MAX`."""
BACKOFF_MAX = 30.0
TIMEOUT_SECONDS = 60.0
_CHUNK = 1 << 20


class _Dropped(ConnectionError):
    """The server closed the connection before the announced end of the file."""


def human(size: float) -> str:
    """``size`` bytes in B / KiB / MiB / GiB.

    Example:
        >>> human(3 * 1024**3), human(512), human(1536)
        ('3.0 GiB', '512 B', '1.5 KiB')
    """
    units = ("B", "KiB", "MiB", "GiB")
    power = 0
    while size >= 1024 and power < len(units) - 1:
        size, power = size / 1024, power + 1
    return f"{size:.0f} B" if power == 0 else f"{size:.1f} {units[power]}"


class ProgressBar:
    """A tqdm bar (size, rate, time left; in bytes unless ``unit`` says otherwise) created by the first
    :meth:`start`; nothing without ``progress`` (nor when the output is not a terminal)."""

    def __init__(self, name: str, progress: bool, unit: str = "B") -> None:
        self.name, self.progress, self.unit, self.bar = name, progress, unit, cast(Any, None)

    def start(self, total: int | None, initial: int) -> None:
        if not self.progress:
            return
        if self.bar is None:
            from tqdm import tqdm

            scale = self.unit == "B"
            self.bar = tqdm(desc=self.name, unit=self.unit, unit_scale=scale, unit_divisor=1024, disable=None)
        self.bar.total, self.bar.n = total, initial
        self.bar.refresh()

    def update(self, count: int) -> None:
        if self.bar is not None:
            self.bar.update(count)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def check_space(folder: Path, needed: int, what: str) -> None:
    """Refuse to start when ``folder``'s disk has less than ``needed`` bytes free (``what`` says what needs them)."""
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise UserError(
            f"not enough free disk space in {folder}: {what} needs {human(needed)}, {human(free)} are free. Free some "
            "space or choose a --root on a larger disk."
        )


def digests(path: Path, progress: bool = False) -> dict[str, str]:
    """The MD5 and SHA-256 of a file, read once (1 MiB at a time; a progress bar in bytes with ``progress``)."""
    md5, sha256 = hashlib.md5(usedforsecurity=False), hashlib.sha256()
    bar = ProgressBar(f"checking {path.name}", progress)
    bar.start(path.stat().st_size, 0)
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            md5.update(chunk)
            sha256.update(chunk)
            bar.update(len(chunk))
    bar.close()
    return {"md5": md5.hexdigest(), "sha256": sha256.hexdigest()}


def _content_range(value: str | None) -> tuple[int | None, int | None]:
    """``(first byte, total)`` of a ``Content-Range: bytes a-b/total`` (or ``bytes */total``) header."""
    if not value or not value.startswith("bytes "):
        return None, None
    span, _, total = value[6:].partition("/")
    first = span.split("-")[0]
    return (int(first) if first.isdigit() else None), (int(total) if total.isdigit() else None)


def _attempt(url: str, part: Path, bar: ProgressBar, room: Callable[[int | None, int], None]) -> None:
    """One request for the bytes ``part`` lacks; returns when the file is complete, raises when it is not."""
    start = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": "ranklit-data-prepare", **({"Range": f"bytes={start}-"} if start else {})}
    try:
        response: Any = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=TIMEOUT_SECONDS)
    except urllib.error.HTTPError as error:
        _, total = _content_range(error.headers.get("Content-Range") if error.headers else None)
        if error.code == 416 and start and total == start:
            return  # the .part already holds the whole file
        if error.code == 416:
            part.unlink()
        raise
    with response:
        first, total = _content_range(response.headers.get("Content-Range"))
        if getattr(response, "status", 200) != 206 or first != start:
            start, length = 0, response.headers.get("Content-Length")  # no Range support: from the start
            total = int(length) if length and length.isdigit() else None
        if "text/html" in response.headers.get("Content-Type", "") and not url.endswith((".html", ".htm")):
            raise UserError(
                f"{url} answered with a web page, not the file (a login, a quota or a confirmation page): download "
                "the file in a browser and pass it with --source PATH."
            )
        room(total, start)
        bar.start(total, start)
        with part.open("ab" if start else "wb") as out:
            while chunk := response.read(_CHUNK):
                out.write(chunk)
                bar.update(len(chunk))
    size = part.stat().st_size
    if total is not None and size < total:
        raise _Dropped(f"the connection closed after {size} of {total} bytes")


def download(
    url: str, target: Path, *, retries: int = 5, progress: bool = True, room: Callable[[int | None, int], None]
) -> None:
    """Download ``url`` to ``target`` through ``target.part``, resuming and retrying (module docstring).

    Args:
        url: ``http(s)://`` or ``ftp://`` address.
        target: where the complete file goes.
        retries: tries after a failure without progress before giving up (the ``.part`` is kept).
        progress: show a progress bar.
        room: called with ``(total size or None, bytes already held)`` before the body is read; raises when the
            disk cannot hold the rest (:func:`check_space`).
    """
    part, bar, failures = target.with_name(target.name + ".part"), ProgressBar(target.name, progress), 0
    try:
        while True:
            before = part.stat().st_size if part.exists() else 0
            try:
                _attempt(url, part, bar, room)
                part.replace(target)
                return
            except urllib.error.HTTPError as error:
                if 400 <= error.code < 500 and error.code not in (408, 416, 429):
                    raise UserError(
                        f"{url}: HTTP {error.code} {error.reason}. Check the address, or pass a mirror or a file on "
                        "disk with --source."
                    ) from None
                reason = f"HTTP {error.code} {error.reason}"
            except (urllib.error.URLError, ConnectionError, TimeoutError, http.client.HTTPException) as error:
                reason = str(getattr(error, "reason", None) or error) or type(error).__name__
            except OSError as error:  # writing the .part
                if error.errno == errno.ENOSPC:
                    raise UserError(f"the disk of {part} is full: free some space and run the command again.") from None
                raise
            failures = 0 if part.exists() and part.stat().st_size > before else failures + 1
            if failures > retries:
                held = part.stat().st_size if part.exists() else 0
                kept = f" The {human(held)} received are kept in {part}: run the same command to continue."
                kept = kept if held else ""
                raise UserError(f"cannot download {url}: {reason} ({failures} failed tries in a row).{kept}")
            time.sleep(min(BACKOFF_MAX, BACKOFF_SECONDS * 2 ** max(failures - 1, 0)))
    finally:
        bar.close()
