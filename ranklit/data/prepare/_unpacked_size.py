"""A bound on what an archive may unpack to, whatever the free disk: decompression bombs are refused early.

An archive may unpack to at most :data:`MAX_RATIO` times its own size, or :data:`FLOOR_BYTES` for a small archive
(image datasets unpack to about their archive's size; their annotation files compress ten-fold at most; a deflate or
gzip bomb reaches a thousand-fold). Two sizes are held to the bound: the **declared** one, the sum of the entries'
sizes read in the archive's headers (a zip's central directory is summed before anything is written; a tar's
headers are summed entry by entry, before each is written), and the **running** one, the bytes the entries written so
far hold on disk (checked after each entry: an entry cannot write much more than it declares, as zip checks each
entry's size and CRC and tar stores it as is, but the count does not trust that). Either over the bound refuses the
archive with a :class:`~ranklit.errors.UserError`; the caller deletes its staging folder, so nothing is kept.

Example:
    >>> import tempfile
    >>> archive = Path(tempfile.mkdtemp()) / "a.zip"; _ = archive.write_bytes(b"x" * 1000)
    >>> bound = UnpackedSize(archive); bound.limit == FLOOR_BYTES
    True
"""

from __future__ import annotations

from pathlib import Path

from ranklit.data.prepare._download import human
from ranklit.errors import UserError

__all__ = ["FLOOR_BYTES", "MAX_RATIO", "UnpackedSize"]

#: The most an archive may unpack to, as a multiple of its size.
MAX_RATIO = 100
#: The bound of a small archive (its unpacked size may reach this whatever its ratio).
FLOOR_BYTES = 64 * 1024**2


class UnpackedSize:
    """The declared and running unpacked sizes of ``archive``, held to the bound (module docstring)."""

    def __init__(self, archive: Path) -> None:
        self.archive, self.size = archive, archive.stat().st_size
        self.limit = max(int(MAX_RATIO * self.size), FLOOR_BYTES)  # read now: a test lowers them
        self.declared = self.written = 0

    def declare(self, size: int) -> None:
        """Add ``size`` declared bytes (entries not yet written); refuse the archive past the bound."""
        self.declared += max(0, size)
        self._check(self.declared, "declares")

    def wrote(self, path: Path) -> None:
        """Add the bytes of the file ``path`` just written; refuse the archive past the bound."""
        if path.is_file() and not path.is_symlink():
            self.written += path.stat().st_size
        self._check(self.written, "has written")

    def _check(self, total: int, what: str) -> None:
        if total > self.limit:
            raise UserError(
                f"{self.archive}: {what} {human(total)} of unpacked files, more than {human(self.limit)} (at most "
                f"{MAX_RATIO} times its {human(self.size)}, or {human(FLOOR_BYTES)}): a decompression bomb, not the "
                "official file. The archive is refused and nothing of it is kept (check --source)."
            )
