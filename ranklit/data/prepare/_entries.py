"""What the catalogue of ``ranklit data prepare`` is made of: a dataset, its files, the readers that check it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Archive", "DatasetEntry", "Reader"]


@dataclass(frozen=True)
class Archive:
    """One file a dataset is made of: an archive (``.tar``, ``.tgz``, ``.tar.gz``, ``.zip``) or a plain file.

    Attributes:
        filename: the name of the official file (a ``--source`` of that name is matched to it).
        url: the official download address, ``None`` where the owner requires a form, a login or a web page.
        digests: ``("md5:<hex>" or "sha256:<hex>", where it was read)`` for each published digest; empty if none.
        into: folder of the prepared root the file is unpacked (or copied) into, ``""`` for the root itself.
    """

    filename: str
    url: str | None
    digests: tuple[tuple[str, str], ...] = ()
    into: str = ""

    @property
    def kind(self) -> str:
        """``"tar"``, ``"zip"`` or ``"file"`` (copied as it is), from the file name."""
        name = self.filename.lower()
        return "tar" if name.endswith((".tar", ".tgz", ".tar.gz")) else "zip" if name.endswith(".zip") else "file"


@dataclass(frozen=True)
class Reader:
    """A ranklit dataset class (its public path, ``ranklit.data.CUB200``), the split read and its other arguments."""

    cls: str
    split: str | None
    kwargs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DatasetEntry:
    """A dataset ``ranklit data prepare NAME`` prepares.

    Attributes:
        name: the command's ``NAME``.
        title: the dataset's name and paper.
        homepage: the owner's page.
        terms: the licence or terms of use, as the homepage states them.
        size: the download size, as published where it is.
        folder: the usual name of the prepared root (``--root data/<folder>``).
        archives: the files it is made of.
        convert: turns the unpacked files (a folder) into the reader's layout; returns the folder that becomes the
            prepared root.
        readers: the readers that must load the prepared root (the layout check).
        configs: the shipped configs that read it.
        manual: where there is no direct download: what to fetch from where (``--source`` is then required).
        subfolder: the prepared root is ``--root/<subfolder>`` (several datasets share one ``--data.root``).
        usage: what to pass to the configs, where ``--data.root`` alone is not enough.
    """

    name: str
    title: str
    homepage: str
    terms: str
    size: str
    folder: str
    archives: tuple[Archive, ...]
    convert: Callable[[Path], Path]
    readers: tuple[Reader, ...]
    configs: tuple[str, ...]
    manual: str | None = None
    subfolder: str | None = None
    usage: str = ""
