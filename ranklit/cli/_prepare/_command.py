"""``ranklit data prepare NAME --root DIR``: download, verify, unpack and lay out a benchmark dataset in one command.

The steps, each of which stops with one line and exit code 2 on a user's problem:

1. the prepared root (``--root``, or ``--root/<subfolder>`` for the Revisited sets) is checked: not a file, writable;
   if it holds a record (:mod:`~ranklit.cli._prepare._record`) that agrees with the catalogue, the layout is checked
   and the command ends (nothing downloaded);
2. every file is downloaded (:mod:`~ranklit.cli._prepare._download`, into ``.<root name>.downloads`` beside the root)
   or taken from ``--source``;
3. every digest is checked before anything is unpacked (a mismatch names the expected and the actual digest);
4. the files are unpacked safely (:mod:`~ranklit.cli._prepare._extraction`) into a staging folder beside the root,
   laid out (:mod:`~ranklit.cli._prepare._conversions`), loaded by the dataset's readers (the layout check of
   ``ranklit data check``), recorded, then renamed into place: an interrupted prepare leaves no half-prepared root;
5. the command prints the ``--data.root`` to pass and the configs that read it.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from ranklit._locks import release_all
from ranklit.cli._prepare._catalog import CATALOG
from ranklit.cli._prepare._download import check_space, digests, download, human
from ranklit.cli._prepare._entries import DatasetEntry
from ranklit.cli._prepare._extraction import unpack
from ranklit.cli._prepare._record import RECORD, read_record, record_problems, write_record
from ranklit.cli._prepare._root_lock import lock_root
from ranklit.cli._prepare._sources import GIVEN, Source, resolve_sources
from ranklit.errors import UserError

__all__ = ["main", "prepare"]


def _epilog() -> str:
    rows = [
        f"  {e.name:<13} {e.title}\n  {'':<13} {e.size}; {e.homepage}\n  {'':<13} terms: {e.terms}\n"
        f"  {'':<13} e.g. --root data/{e.folder}"
        for e in CATALOG.values()
    ]
    return "datasets (NAME, title, download size, source, terms):\n" + "\n".join(rows) + "\n\nSee docs/datasets.md."


def _prepare_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ranklit data prepare",
        description="Download, verify, unpack and lay out a benchmark dataset in one command.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("name", metavar="NAME", help=f"the dataset: {', '.join(CATALOG)}")
    parser.add_argument("--root", required=True, type=Path, help="the folder to prepare (created; must be empty)")
    parser.add_argument("--source", action="append", default=[], metavar="URL|PATH",
                        help="a mirror's address or a file already on disk (repeat for each file of the dataset), "
                        "or a folder holding the files")  # fmt: skip
    parser.add_argument("--sha256", action="append", default=[], metavar="HEX",
                        help="the expected SHA-256 of each --source (a mirror's repacked archive)")  # fmt: skip
    parser.add_argument("--retries", type=int, default=5, help="tries after a failed download without progress")
    parser.add_argument("--keep-archives", action="store_true", help="keep the downloaded archives")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def _entry(name: str) -> DatasetEntry:
    if name not in CATALOG:
        raise UserError(f"unknown dataset {name!r}: `ranklit data prepare` knows {', '.join(CATALOG)} (see --help).")
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


def prepare(entry: DatasetEntry, root: Path, options: argparse.Namespace) -> tuple[Path, list[str], bool]:
    """Prepare ``entry`` under ``root`` (module docstring); returns the prepared folder, its layout lines and
    whether it was already prepared."""
    root = root.expanduser().absolute()
    target = root / entry.subfolder if entry.subfolder else root
    for folder in {root, target}:
        if folder.exists() and not folder.is_dir():
            raise UserError(f"--root: {folder} is a file; give a folder (it is created if missing).")
    sources = resolve_sources(entry, options.source, options.sha256, root)
    lock_root(target)  # one prepare of a root at a time (released when the command ends)
    if (lines := _existing(target, entry, sources)) is not None:
        return target, lines, True
    _writable(target.parent)
    cache, stage = (target.parent / f".{target.name}.{part}" for part in ("downloads", "prepare-tmp"))
    paths = [_fetch(source, cache, options.retries, not options.no_progress) for source in sources]
    progress = not options.no_progress
    archives = [_verify(s, p, s.path is None, progress) for s, p in zip(sources, paths, strict=True)]
    check_space(target.parent, sum(p.stat().st_size for p in paths), f"unpacking {entry.name}")
    shutil.rmtree(stage, ignore_errors=True)  # what a killed earlier run left
    try:
        for source, path in zip(sources, paths, strict=True):
            _say(f"unpacking {path.name}")
            unpack(path, source.archive.kind, stage / source.archive.into, source.archive.filename, progress)
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
                        "some space and run the command again.") from None  # fmt: skip
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    if not options.keep_archives:
        shutil.rmtree(cache, ignore_errors=True)
    return target, lines, False


def main(args: list[str]) -> None:
    """``ranklit data prepare ...`` (``args`` after ``prepare``); Ctrl-C exits with 130 in one line."""
    options = _prepare_parser().parse_args(args)
    entry = _entry(options.name)
    try:
        target, lines, again = prepare(entry, options.root, options)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted: nothing was moved into --root; run the same command to continue (a partial "
                         "download resumes).\n")  # fmt: skip
        raise SystemExit(130) from None
    finally:
        release_all()  # the root's lock
    data_root = target.parent if entry.subfolder else target
    state = "already prepared (its record verified; nothing downloaded)" if again else "prepared"
    _say(f"{entry.name} {state} in {target}: {'; '.join(lines)}")
    _say(f"--data.root {data_root}")
    if entry.configs:
        example = f"ranklit data check --config {entry.configs[0]} --data.root {data_root}"
        _say(f"configs: {', '.join(entry.configs)}, e.g. `{example}`")
    if entry.usage:
        _say(f"note: {entry.usage.replace('ROOT', str(data_root))}")
