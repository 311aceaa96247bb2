"""Unpacking a downloaded archive without letting it write outside the folder it is unpacked into.

Every entry of a tar or zip archive is checked before it is written: an absolute path, a ``..`` component, a link
(symbolic or hard) whose target lies outside, or a device file refuses the whole archive with a
:class:`~ranklit.errors.UserError` naming the entry. The caller unpacks into a staging folder that it deletes on any
failure, so a refused archive leaves nothing behind. Tar entries are also written through Python's ``data`` filter
where it exists (Python 3.11.4+), a second line of defence. A decompression bomb is refused by its declared and its
running unpacked size (`_unpacked_size`), whatever the free disk. One pass over the
archive: a 120 GB ``.tar.gz`` is decompressed once.
"""

from __future__ import annotations

import posixpath
import shutil
import stat
import tarfile
import zipfile
from pathlib import Path

from ranklit.data.prepare._download import ProgressBar
from ranklit.data.prepare._unpacked_size import UnpackedSize
from ranklit.errors import UserError

__all__ = ["entry_problem", "unpack"]

_TAR_FILTER: dict[str, str] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}


def _outside(relative: str) -> bool:
    normal = posixpath.normpath(relative)
    return normal == ".." or normal.startswith("../")


def entry_problem(name: str, link: str | None = None, hard_link: bool = False) -> str | None:
    """Why the archive entry ``name`` (a link to ``link``) would write outside the folder, or ``None``.

    Example:
        >>> entry_problem("CUB_200_2011/images/a.jpg") is None
        True
        >>> entry_problem("../evil.txt"), entry_problem("/etc/evil"), entry_problem("ok", link="../../x")
        ('a `..` component', 'an absolute path', 'a link to ../../x, outside the archive')
    """
    path = name.replace("\\", "/")
    if path.startswith("/") or (len(path) > 1 and path[1] == ":"):
        return "an absolute path"
    if ".." in path.split("/"):
        return "a `..` component"
    if link is None:
        return None
    target = link.replace("\\", "/")
    relative = target if hard_link else posixpath.join(posixpath.dirname(path), target)
    if target.startswith("/") or _outside(relative):
        return f"a link to {link}, outside the archive"
    return None


def _refuse(archive: Path, name: str, problem: str, into: Path) -> UserError:
    return UserError(
        f"{archive}: entry {name!r} is {problem}: it would be written outside {into}. The archive is refused and "
        "nothing of it is kept: it is not the official file (check --source)."
    )


def _unpack_tar(archive: Path, into: Path, bar: ProgressBar) -> int:
    count, size = 0, UnpackedSize(archive)
    with tarfile.open(archive, "r:*") as tar:
        for member in tar:
            size.declare(member.size if member.isfile() else 0)
            link = member.linkname if member.issym() or member.islnk() else None
            problem = entry_problem(member.name, link, member.islnk())
            if problem is None and (member.isdev() or member.isfifo()):
                problem = "a device file"
            if problem is not None:
                raise _refuse(archive, member.name, problem, into)
            tar.extract(member, into, **_TAR_FILTER)  # type: ignore[arg-type]
            size.wrote(into / member.name)
            count += member.isfile()
            bar.update(member.isfile())
    return count


def _unpack_zip(archive: Path, into: Path, bar: ProgressBar) -> int:
    count, size = 0, UnpackedSize(archive)
    with zipfile.ZipFile(archive) as bundle:
        size.declare(sum(info.file_size for info in bundle.infolist()))  # the central directory, before any write
        for info in bundle.infolist():
            link = bundle.read(info).decode(errors="replace") if stat.S_ISLNK(info.external_attr >> 16) else None
            if (problem := entry_problem(info.filename, link)) is not None:
                raise _refuse(archive, info.filename, problem, into)
            size.wrote(Path(bundle.extract(info, into)))
            count += not info.is_dir()
            bar.update(not info.is_dir())
    return count


def unpack(archive: Path, kind: str, into: Path, filename: str, progress: bool = False) -> int:
    """Unpack ``archive`` into ``into``; returns the number of files written. ``kind`` ``"file"`` copies it as
    ``into/filename``; an archive is read as zip or tar by its content (a mirror may repack one as the other). A
    corrupt archive is a :class:`UserError` naming it. ``progress``: a bar counting the files written."""
    into.mkdir(parents=True, exist_ok=True)
    if kind != "file":
        bar = ProgressBar(f"unpacking {archive.name}", progress, unit=" files")
        bar.start(None, 0)
        try:
            zipped = zipfile.is_zipfile(archive)
            return _unpack_zip(archive, into, bar) if zipped else _unpack_tar(archive, into, bar)
        except (tarfile.TarError, zipfile.BadZipFile, EOFError) as error:
            reason = str(error).splitlines()[0]
            raise UserError(f"{archive} is not a readable tar or zip archive ({reason}): download it again.") from None
        finally:
            bar.close()
    shutil.copyfile(archive, into / filename)
    return 1
