"""One ``ranklit data prepare`` per root: ``.<root name>.lock`` beside the prepared root names the running one.

Two prepares of one root at once would share the partial download (``*.part``) and the staging folder, and the second
would fail blaming the download or the archive's layout. The first takes the lock (:mod:`ranklit._locks`: atomic,
a stale lock of a killed prepare taken over with a line) before it looks at the root; a second one is refused in one
line naming the first, before it downloads or writes anything; run it again once the first has finished (it then
finds the root prepared, checks its record and downloads nothing). A root whose folder cannot be written takes no
lock: nothing can be prepared there, and an already prepared root on read-only storage is still checked. The lock
is released when the command ends (:func:`ranklit._locks.release_all`).
"""

from __future__ import annotations

import errno
from pathlib import Path

from ranklit._locks import sibling_lock, take
from ranklit.errors import UserError

__all__ = ["lock_root"]


def lock_root(target: Path) -> None:
    """Take the lock of the prepared root ``target`` (module docstring); a :class:`UserError` naming the running
    prepare while another process holds it."""

    def busy(who: str) -> UserError:
        return UserError(
            f"{target} is being prepared by {who} (`ranklit data prepare`): wait for it to finish, then run the "
            "command again (it checks the prepared root and downloads nothing), or stop it."
        )

    try:
        take(sibling_lock(target), busy)
    except PermissionError:
        return  # a folder this process cannot write in: `_writable` or the record check answers
    except OSError as error:
        if error.errno not in (errno.EROFS, errno.ENOENT):  # ENOENT: a parent that cannot be created (under /proc)
            raise
