"""Download, verify, unpack and lay out a benchmark dataset in one call (:func:`prepare_dataset`; its command is
``ranklit data prepare NAME --root DIR``).

The steps, each of which stops with one line and exit code 2 on a user's problem:

1. the prepared root (``--root``, or ``--root/<subfolder>`` for the Revisited sets) is checked: not a file, writable;
   if it holds a record (:mod:`~ranklit.data.prepare._record`) that agrees with the catalogue, the layout is checked
   and the command ends (nothing downloaded);
2. every file is downloaded (:mod:`~ranklit.data.prepare._download`, into ``.<root name>.downloads`` beside the root)
   or taken from ``--source``;
3. every digest is checked before anything is unpacked (a mismatch names the expected and the actual digest);
4. the files are unpacked safely (:mod:`~ranklit.data.prepare._extraction`) into a staging folder beside the root,
   laid out (:mod:`~ranklit.data.prepare._conversions`), loaded by the dataset's readers (the layout check of
   ``ranklit data check``), recorded, then renamed into place: an interrupted prepare leaves no half-prepared root;
5. the command prints the ``--data.root`` to pass and the configs that read it.
"""

from __future__ import annotations

import errno
import importlib
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ranklit._locks import release, sibling_lock
from ranklit.data.prepare._catalog import CATALOG
from ranklit.data.prepare._download import check_space, digests, download, human
from ranklit.data.prepare._entries import DatasetEntry
from ranklit.data.prepare._extraction import unpack
from ranklit.data.prepare._record import RECORD, read_record, record_problems, write_record
from ranklit.data.prepare._root_lock import lock_root
from ranklit.data.prepare._sources import GIVEN, Source, resolve_sources
from ranklit.errors import UserError

__all__ = ["PreparedDataset", "prepare_dataset"]


def _entry(name: str) -> DatasetEntry:
    if name not in CATALOG:
        known = ", ".join(CATALOG)
        raise UserError(f"unknown dataset {name!r}: ranklit prepares {known} (`ranklit data prepare --help`).")
    return CATALOG[name]


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _writable(folder: Path) -> None:
    """Create ``folder`` and check that a file can be written in it."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        reason = error.strerror or error
        raise UserError(f"cannot write in {folder} ({reason}): choose a --root you can write to.") from None


def _layout(root: Path, entry: DatasetEntry) -> list[str]:
    """Load ``root`` with each reader of ``entry`` (their index checks: missing, empty or twice-listed files)."""
    lines = []
    for reader in entry.readers:
        package, _, name = reader.cls.rpartition(".")
        cls: Any = getattr(importlib.import_module(package), name)
        try:
            data = cls(root, reader.split, **reader.kwargs)
        except (OSError, ValueError) as error:
            raise UserError(f"the prepared files fail the layout check of {name}: {error}") from None
        lines.append(f"{reader.split or 'all'} {len(data)} images, {data.num_classes} classes")
    return lines


def _fetch(source: Source, cache: Path, retries: int, progress: bool) -> Path:
    if source.path is not None:
        return source.path
    assert source.url is not None  # resolve_sources gives a url or a path
    target = cache / source.archive.filename
    if not target.is_file():

        def room(total: int | None, held: int) -> None:
            if total is not None:  # the rest of the download and room to unpack it
                what = f"{source.archive.filename} ({human(total)}) and its unpacking"
                check_space(cache, total - held + total, what)

        _say(f"downloading {source.url}")
        cache.mkdir(exist_ok=True)
        download(source.url, target, retries=retries, progress=progress, room=room)
    return target


def _verify(source: Source, path: Path, downloaded: bool, progress: bool) -> dict[str, Any]:
    """The file's record entry; a digest that differs from an expected one is a :class:`UserError`."""
    found = digests(path, progress)
    for digest, read_at in source.digests:
        kind, _, value = digest.partition(":")
        if found[kind] != value:
            kept = ""
            if downloaded:
                path.replace(path.with_name(path.name + ".rejected"))
                kept = f" (kept as {path.name}.rejected)"
            raise UserError(
                f"{path}{kept}: wrong digest: expected {kind} {value} ({read_at}), got {kind} {found[kind]}. Nothing "
                "was unpacked. A mirror's repacked archive needs its own --sha256."
            )
    if not source.digests:
        name = source.archive.filename
        _say(f"note: no digest is published for {name}: its sha256 {found['sha256']} is recorded in {RECORD}.")
    where = source.url or str(source.path)
    expected = {"expected": [d for d, _ in source.digests], "read_at": [r for _, r in source.digests]}
    return {"file": source.archive.filename, "source": where, **found, **expected}


def _existing(target: Path, entry: DatasetEntry, sources: list[Source]) -> list[str] | None:
    """The layout lines of an already prepared ``target`` whose record verifies; ``None`` if ``target`` is free."""
    if not target.exists() or (target.is_dir() and not any(target.iterdir())):
        return None
    record = read_record(target)
    if record is None:
        raise UserError(
            f"{target} already holds files but no {RECORD}: choose a new or empty --root (the prepared dataset is "
            "moved there once complete)."
        )
    # a root made from a mirror's archive (checked against a --sha256 then) is not held to the published digest
    mirrored = {a.get("file") for a in record.get("archives") or [] if GIVEN in (a.get("read_at") or [])}
    given = [any(r == GIVEN for _, r in s.digests) for s in sources]
    expected = [
        [] if s.archive.filename in mirrored and not user else [d for d, _ in s.digests]
        for s, user in zip(sources, given, strict=True)
    ]
    if problems := record_problems(target, record, entry.name, expected):
        raise UserError(f"{target} was prepared before, but {'; '.join(problems)}: remove it to prepare it again.")
    return _layout(target, entry)


@dataclass(frozen=True)
class PreparedDataset:
    """What :func:`prepare_dataset` prepared: ``path`` (the prepared folder), ``layout`` (one line per split that the
    dataset's readers loaded), ``already_prepared`` (its record verified; nothing was downloaded)."""

    entry: DatasetEntry
    path: Path
    layout: list[str]
    already_prepared: bool

    @property
    def data_root(self) -> Path:
        """The ``data.root`` to pass to the configs (the parent of ``path`` for the Revisited sets)."""
        return self.path.parent if self.entry.subfolder else self.path

    @property
    def configs(self) -> tuple[str, ...]:
        """The shipped configs that read this dataset."""
        return tuple(self.entry.configs)


def prepare_dataset(
    name: str,
    root: str | Path,
    *,
    source: str | Path | Sequence[str | Path] = (),
    sha256: str | Sequence[str] = (),
    retries: int = 5,
    keep_archives: bool = False,
    progress: bool = True,
) -> PreparedDataset:
    """Download, verify, unpack and lay out the benchmark dataset ``name`` under ``root``: what ``ranklit data
    prepare NAME --root ROOT`` does (the steps are the module docstring's), as a function.

    Args:
        name: a key of the catalogue (``cub``, ``sop``, ``inaturalist``, ... : ``ranklit data prepare --help``).
        root: the folder to prepare (created; must be empty or a root this function prepared before).
        source: mirrors' addresses or files / folders already on disk, one for each file of the dataset
            (``--source``); a single string or path is one source; empty: the official addresses.
        sha256: the expected SHA-256 of each ``source`` (a mirror's repacked archive; ``--sha256``); a single
            string is one digest.
        retries: tries after a failed download without progress.
        keep_archives: keep the downloaded archives (in ``.<root name>.downloads`` beside ``root``).
        progress: progress bars on stdout (the step lines are printed either way).

    Returns:
        What was prepared: the folder, the ``data.root`` to pass, the readers' layout lines, whether it was prepared
        before (its record verified: nothing was downloaded) and the configs that read it.

    Raises:
        UserError: a problem the user can fix (unknown name, a file as root, a wrong digest, no disk space, ...),
            in one sentence that names the file or value and the fix; nothing half-prepared is left in ``root``.

    Example:
        >>> prepare_dataset("no-such-set", "/tmp/x")
        Traceback (most recent call last):
        ...
        ranklit.errors.UserError: unknown dataset 'no-such-set': ranklit prepares cub, ...
    """
    entry = _entry(name)
    root = Path(root).expanduser().absolute()
    target = root / entry.subfolder if entry.subfolder else root
    for folder in {root, target}:
        if folder.exists() and not folder.is_dir():
            raise UserError(f"--root: {folder} is a file; give a folder (it is created if missing).")
    sources = resolve_sources(entry, _values("source", source), _values("sha256", sha256), root)
    lock_root(target)  # one prepare of a root at a time (released when this call ends)
    try:
        return _prepare_locked(entry, target, sources, retries, keep_archives, progress)
    finally:
        release(sibling_lock(target))


def _values(keyword: str, given: str | Path | Sequence[str | Path]) -> list[str]:
    """``given`` as a list of strings: one string or path is one value (never its characters); the items of a list
    or tuple must be strings or paths (a ``TypeError`` naming the keyword otherwise)."""
    if isinstance(given, (str, Path)):
        return [str(given)]
    values = list(given)
    if wrong := [value for value in values if not isinstance(value, (str, Path))]:
        raise TypeError(f"prepare_dataset: `{keyword}` takes a string, a path or a list of them; got an item "
                        f"{wrong[0]!r} of type {type(wrong[0]).__name__}.")
    return [str(value) for value in values]


def _prepare_locked(
    entry: DatasetEntry,
    target: Path,
    sources: list[Source],
    retries: int,
    keep_archives: bool,
    progress: bool,
) -> PreparedDataset:
    """The steps of :func:`prepare_dataset` once the root's lock is held."""
    if (lines := _existing(target, entry, sources)) is not None:
        return PreparedDataset(entry, target, lines, already_prepared=True)
    _writable(target.parent)
    cache, stage = (target.parent / f".{target.name}.{part}" for part in ("downloads", "prepare-tmp"))
    paths = [_fetch(each, cache, retries, progress) for each in sources]
    archives = [_verify(s, p, s.path is None, progress) for s, p in zip(sources, paths, strict=True)]
    check_space(target.parent, sum(p.stat().st_size for p in paths), f"unpacking {entry.name}")
    shutil.rmtree(stage, ignore_errors=True)  # what a killed earlier run left
    try:
        for each, path in zip(sources, paths, strict=True):
            _say(f"unpacking {path.name}")
            unpack(path, each.archive.kind, stage / each.archive.into, each.archive.filename, progress)
        prepared = entry.convert(stage)
        lines = _layout(prepared, entry)
        write_record(prepared, entry.name, archives)
        if target.exists():
            target.rmdir()  # empty (checked above)
        os.replace(prepared, target)
    except OSError as error:
        if error.errno != errno.ENOSPC:
            raise
        raise UserError(f"the disk of {target.parent} filled up while unpacking {entry.name}: nothing was kept; free "
                        "some space and run the command again.") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    if not keep_archives:
        shutil.rmtree(cache, ignore_errors=True)
    return PreparedDataset(entry, target, lines, already_prepared=False)
