"""Where each file of a dataset comes from: the catalogue's address, or the ``--source`` and ``--sha256`` given.

A ``--source`` is an address (``http://``, ``https://``, ``ftp://``, ``file://``: a mirror) or a path on disk: a file
(an archive already downloaded) or a folder holding the files under their official names. Sources are matched to
the dataset's files by file name, else in the catalogue's order when there are as many; the expected digest of each
file is its ``--sha256`` (a mirror's repacked archive) or the published ones.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from ranklit.data.prepare._entries import Archive, DatasetEntry
from ranklit.errors import UserError

__all__ = ["GIVEN", "Source", "resolve_sources"]

GIVEN = "given with --sha256"
"""Where the expected digest of a file comes from when the user gives it."""
_SCHEMES = ("http", "https", "ftp", "file")


@dataclass(frozen=True)
class Source:
    """One file of the dataset: the catalogue's :class:`Archive`, where it is (``url`` or ``path``) and the digests
    expected (``("md5:<hex>" or "sha256:<hex>", where it comes from)``; empty when none is known)."""

    archive: Archive
    url: str | None
    path: Path | None
    digests: tuple[tuple[str, str], ...]


def _file_name(source: str) -> str:
    return Path(urllib.parse.urlparse(source).path).name if _is_url(source) else Path(source).name


def _is_url(source: str) -> bool:
    return urllib.parse.urlparse(source).scheme in _SCHEMES


def _place(text: str) -> tuple[str | None, Path | None]:
    if _is_url(text):
        return text, None
    path = Path(text).expanduser()
    if not path.exists():
        raise UserError(f"--source {text}: no such file, and not an address ({', '.join(_SCHEMES)}://...).")
    return None, path.absolute()


def _matched(entry: DatasetEntry, given: list[str]) -> list[tuple[str, int]]:
    """The source of each file of ``entry`` (in the catalogue's order) and its position among the ``--source``."""
    files = [a.filename for a in entry.archives]
    if len(given) == 1 and Path(given[0]).expanduser().is_dir():
        folder = Path(given[0]).expanduser()
        if missing := [name for name in files if not (folder / name).is_file()]:
            names = ", ".join(files[:6]) + (", ..." if len(files) > 6 else "")
            raise UserError(f"--source {folder} lacks {', '.join(missing[:5])}: {entry.name} is made of {names}.")
        return [(str(folder / name), index) for index, name in enumerate(files)]
    by_name = {_file_name(source): index for index, source in enumerate(given)}
    if len(given) == len(files) and all(name in by_name for name in files):
        return [(given[by_name[name]], by_name[name]) for name in files]
    if len(given) == len(files):
        return [(source, index) for index, source in enumerate(given)]
    raise UserError(
        f"{entry.name} is made of {len(files)} file(s) ({', '.join(files[:6])}{', ...' if len(files) > 6 else ''}); "
        f"{len(given)} source(s) given (--source; Python: `source=`): give one per file (matched by file name, else "
        "in this order), or one folder that holds them all."
    )


def resolve_sources(entry: DatasetEntry, given: list[str], sha256: list[str], root: Path) -> list[Source]:
    """Each file of ``entry`` with its location and expected digest; a dataset without a direct download needs
    ``--source`` (its error says what to fetch from where)."""
    if not given and entry.manual:
        files = " ".join(f"--source PATH/{a.filename}" for a in entry.archives)
        raise UserError(f"{entry.manual}: `ranklit data prepare {entry.name} --root {root} {files}`.")
    for value in sha256:
        if not re.fullmatch(r"[0-9a-fA-F]{64}", value):
            raise UserError(f"--sha256 {value!r} (Python: `sha256=`): a SHA-256 digest is 64 hexadecimal digits.")
    if sha256 and len(sha256) != len(entry.archives):
        raise UserError(
            f"{len(sha256)} digest(s) given (--sha256; Python: `sha256=`) for the {len(entry.archives)} file(s) of "
            f"{entry.name}: give one per file, in the order of the sources."
        )
    places = _matched(entry, given) if given else [(a.url or "", i) for i, a in enumerate(entry.archives)]
    sources = []
    for archive, (place, position) in zip(entry.archives, places, strict=True):
        url, path = _place(place)
        expected = ((f"sha256:{sha256[position].lower()}", GIVEN),) if sha256 else archive.digests
        sources.append(Source(archive, url, path, expected))
    return sources
