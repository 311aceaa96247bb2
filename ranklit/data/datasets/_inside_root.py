"""Paths read from data files (a CSV's ``path`` column, a ground truth's image names) are kept inside the root.

A data file names images relative to the dataset's ``root``; a name with ``..`` or an absolute path that leads out of
it would make ranklit read (and ``data check`` hash, ``predict`` index) a file elsewhere on the machine, e.g. a
downloaded ground truth naming ``../../../home/me/.ssh/id_rsa``. :func:`outside_root` says which names do; the readers
refuse them with the line numbers. The check is on the path as written (``..`` resolved lexically), **not** on where
symbolic links lead: a link inside the root that points elsewhere (``root/images -> /mnt/disk/images``) is the
owner's choice and is followed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ["OUTSIDE_FIX", "outside_root"]

OUTSIDE_FIX = (
    "Give paths relative to `--data.root` that stay inside it (no `..` above it, no absolute path elsewhere), or set "
    "`--data.root` to a folder that holds them all; a symbolic link inside the root may point anywhere"
)


def outside_root(root: Path, names: Sequence[str | Path]) -> list[int]:
    """The positions of ``names`` whose path ``root / name`` (lexically normalised) is not inside ``root``.

    Example:
        >>> outside_root(Path("/data"), ["a/1.jpg", "../etc/passwd", "/etc/passwd", "/data/b.jpg", "a/../b.jpg"])
        [1, 2]
    """
    top = os.path.normpath(os.path.abspath(root))
    return [
        i
        for i, name in enumerate(names)
        if os.path.commonpath([top, os.path.normpath(os.path.join(top, name))]) != top
    ]
