"""The record a prepared root keeps of what it holds: ``ranklit-prepared.json``.

It names the dataset, each file it was made from (source, MD5, SHA-256, the expected digest and where that digest
was read, or that it was recorded at this first download), and the number and total size of the files of the root.
A re-run of ``ranklit data prepare`` reads it back (:func:`record_problems`): the same dataset, digests that agree
with the catalogue and ``--sha256``, the same files, and nothing is downloaded.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

__all__ = ["RECORD", "count_files", "read_record", "record_problems", "write_record"]

RECORD = "ranklit-prepared.json"


def count_files(root: Path) -> tuple[int, int]:
    """``(files, bytes)`` under ``root``, the record itself excepted."""
    files = size = 0
    for folder, _, names in os.walk(root):
        for name in names:
            if name == RECORD and Path(folder) == root:
                continue
            files += 1
            size += os.stat(os.path.join(folder, name), follow_symlinks=False).st_size
    return files, size


def write_record(root: Path, dataset: str, archives: list[dict[str, Any]]) -> None:
    """Write the record of ``root`` (after its files are in place: their count and size are part of it)."""
    files, size = count_files(root)
    record = {
        "dataset": dataset,
        "prepared_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "archives": archives,
        "files": files,
        "bytes": size,
    }
    (root / RECORD).write_text(json.dumps(record, indent=2) + "\n")


def read_record(root: Path) -> dict[str, Any] | None:
    """The record of ``root``, ``None`` without one (an unreadable one counts as none)."""
    try:
        record = json.loads((root / RECORD).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def record_problems(root: Path, record: dict[str, Any], dataset: str, expected: list[list[str]]) -> list[str]:
    """What the record of ``root`` contradicts: another dataset, an archive whose digest differs from ``expected``
    (``"md5:<hex>"`` / ``"sha256:<hex>"`` digests per archive, none to skip it), files gone, added or resized."""
    if record.get("dataset") != dataset:
        return [f"it holds {record.get('dataset')!r}, not {dataset!r}"]
    problems = []
    archives = record.get("archives") or []
    for digests, archive in zip(expected, archives, strict=False):
        for digest in digests:
            kind, _, value = digest.partition(":")
            if archive.get(kind) != value:
                problems.append(f"{archive.get('file')} had {kind} {archive.get(kind)}, expected {value}")
    if len(archives) != len(expected):
        problems.append(f"it was made from {len(archives)} files, the dataset has {len(expected)}")
    files, size = count_files(root)
    if (files, size) != (record.get("files"), record.get("bytes")):
        problems.append(
            f"it now holds {files} files ({size} bytes), the record says {record.get('files')} ({record.get('bytes')} "
            "bytes)"
        )
    return problems
