"""The manifests of a descriptor folder, checked before any shard is read: no stale, foreign or half-written shard.

A manifest (format: :mod:`ranklit.index.descriptors`) of version 2 names its run (``run``: a random id drawn
once per prediction, shared by its processes and part of every shard name), its writer group (``group``: the name
prefix of one prediction, ``""`` for ``ranklit predict``, ``block<b>-`` for a block of ``ranklit index``), its
process (``rank`` of ``ranks``) and whether it was finished (``complete``). :func:`read_manifests` refuses, with a
:class:`ranklit.errors.UserError` naming the folder and the fix:

* a manifest that is not valid JSON or lacks a field;
* a manifest marked incomplete (written at the writer's start, rewritten complete at its end: a stopped or killed
  prediction);
* a group whose manifests name different runs, or lack a process (output of two predictions mixed);
* a ``.npy`` file that no manifest names, or a named shard that is missing or has another number of rows.

Manifests of version 1 (before run identities) are read as they are, but not mixed with version 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ranklit.errors import UserError

__all__ = ["FORMAT", "SHARD_FILES", "owned_files", "read_manifests"]

FORMAT = "ranklit-descriptors"
SHARD_FILES = ("embeddings", "index", "labels")
_FIX = "run the prediction again into a new folder, or into this one with `--overwrite true`"
_FIELDS: dict[str, type | tuple[type, ...]] = {"run": str, "group": str, "rank": int, "ranks": int, "complete": bool}


def owned_files(folder: Path, prefix: str = "") -> list[Path]:
    """The files of ``folder`` a writer group ``prefix`` owns: manifests, shards, their temporary files."""
    if not folder.is_dir():
        return []
    return sorted(
        path
        for path in folder.iterdir()
        if path.is_file() and path.name.lstrip(".").startswith(prefix) and path.suffix in (".json", ".npy", ".tmp")
    )


def _malformed(manifest: Path, why: str) -> UserError:
    return UserError(f"{manifest} is not a valid ranklit descriptor manifest ({why}): {_FIX}.")


def _parse(manifest: Path) -> dict[str, Any]:
    try:
        meta = json.loads(manifest.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise _malformed(manifest, f"unreadable JSON: {error}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise _malformed(manifest, f"format {meta.get('format') if isinstance(meta, dict) else None!r}")
    shards = meta.get("shards")
    if meta.get("version") not in (1, 2) or not isinstance(meta.get("dim"), int) or not isinstance(shards, list):
        raise _malformed(manifest, "version, dim or shards missing")
    if not all(
        isinstance(s, dict) and isinstance(s.get("stem"), str) and isinstance(s.get("rows"), int) for s in shards
    ):
        raise _malformed(manifest, "a shard without stem or rows")
    if meta["version"] == 2:
        wrong = [key for key, kind in _FIELDS.items() if not isinstance(meta.get(key), kind)]
        if wrong:
            raise _malformed(manifest, f"missing or wrong {', '.join(wrong)}")
    return meta


def _check_runs(folder: Path, metas: dict[Path, dict[str, Any]]) -> None:
    if len({meta["version"] for meta in metas.values()}) > 1:
        raise UserError(f"{folder} mixes the output of an older ranklit with a newer one: {_FIX}.")
    for manifest, meta in metas.items():
        if meta["version"] == 2 and not meta["complete"]:
            raise UserError(
                f"{folder} holds a half-written prediction ({manifest.name} is marked incomplete: its run was stopped "
                f"or killed): {_FIX}."
            )
    groups: dict[str, list[dict[str, Any]]] = {}
    for meta in metas.values():
        if meta["version"] == 2:
            groups.setdefault(meta["group"], []).append(meta)
    for group, members in groups.items():
        runs, ranks = {m["run"] for m in members}, sorted(m["rank"] for m in members)
        if len(runs) > 1 or ranks != list(range(members[0]["ranks"])):
            raise UserError(
                f"{folder} mixes the output of several predictions (runs {sorted(runs)}, processes {ranks} of "
                f"{sorted({m['ranks'] for m in members})}{f', group {group!r}' if group else ''}): {_FIX}."
            )


def _check_shards(folder: Path, metas: dict[Path, dict[str, Any]]) -> None:
    named = {f"{s['stem']}.{part}.npy" for meta in metas.values() for s in meta["shards"] for part in SHARD_FILES}
    stray = sorted(path.name for path in folder.glob("*.npy") if path.name not in named)
    if stray:
        more = f" and {len(stray) - 3} more" if len(stray) > 3 else ""
        raise UserError(f"{folder} holds shards no manifest names ({', '.join(stray[:3])}{more}): {_FIX}.")
    for manifest, meta in metas.items():
        for shard in meta["shards"]:
            for part in SHARD_FILES[:2]:
                path = folder / f"{shard['stem']}.{part}.npy"
                try:
                    rows = np.load(path, mmap_mode="r").shape[0]
                except (OSError, ValueError) as error:
                    raise UserError(f"{path} (named by {manifest.name}) cannot be read ({error}): {_FIX}.") from None
                if rows != shard["rows"]:
                    raise UserError(f"{path} has {rows} rows, {manifest.name} says {shard['rows']}: {_FIX}.")


def read_manifests(folder: Path) -> list[dict[str, Any]]:
    """The manifests of ``folder`` in name order, after the checks of the module docstring (cost: one small file
    read per manifest, one ``.npy`` header per shard)."""
    metas = {manifest: _parse(manifest) for manifest in sorted(folder.glob("*.json"))}
    _check_runs(folder, metas)
    _check_shards(folder, metas)
    return list(metas.values())
