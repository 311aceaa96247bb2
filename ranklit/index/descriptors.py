"""Descriptor sets that may not fit in memory: numpy ``.npy`` shards on disk, read through memory maps.

A descriptor set is anything with ``num_rows``, ``dim``, ``chunks(rows)`` (the rows in order, a bounded number at a
time) and ``take(index)`` (a few rows by position): :class:`TensorDescriptors` wraps a tensor,
:class:`DescriptorShards` reads a folder written by :class:`DescriptorWriter` (what ``ranklit predict`` writes) and
:class:`MappedDescriptors` applies a row-wise function (a whitening) lazily. Scores against a set are computed chunk
by chunk (:mod:`ranklit.index.neighbours`), so memory is ``O(Q·N + chunk·D)`` instead of ``O(N·D)``.

Chunks are read with plain file reads (the resident memory stays at one chunk; the operating system's page cache is
not counted), rows taken by position through the memory map.

**On-disk format** (a folder, one writer per process)::

    <name>.json                      manifest: {"format": "ranklit-descriptors", "version": 2, "dim": D,
                                     "run": R, "group": G, "rank": r, "ranks": W, "complete": true,
                                     "shards": [{"rows": n, "stem": "<name>-<R>-00000"}, ...]}
    <name>-<R>-00000.embeddings.npy  [n, D] float32
    <name>-<R>-00000.index.npy       [n] int64 dataset indices of the rows
    <name>-<R>-00000.labels.npy      [n] or [n, L] int64 (absent for unlabelled sets)

``R`` is the run's identity (a random id drawn once per prediction, the same in all its processes). Under DDP rank
``r`` writes ``<name>`` = ``<G>rank<r>``; a reader takes every manifest of the folder in name order and drops rows
whose dataset index was already read (the padding repeats of a distributed sampler). The manifest is written
``complete: false`` when the writer starts and rewritten ``complete: true`` when it closes; a folder holding an
incomplete manifest, manifests of different runs in one group, or shards no manifest names is refused
(:mod:`ranklit.index._manifests`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ranklit.index._manifests import FORMAT, read_manifests

__all__ = [
    "Descriptors",
    "TensorDescriptors",
    "MappedDescriptors",
    "ConcatenatedDescriptors",
    "DescriptorShards",
    "DescriptorWriter",
    "as_descriptors",
    "open_descriptors",
]

DEFAULT_CHUNK_ROWS = 8192  # 64 MB of 2048-d float32 rows


class Descriptors:
    """A set of ``num_rows`` descriptors of size ``dim``, read chunk by chunk (see the module docstring)."""

    num_rows: int
    dim: int

    def chunks(self, rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[Tensor]:
        """The descriptors in order, ``[<= rows, D]`` at a time."""
        raise NotImplementedError

    def take(self, index: Tensor) -> Tensor:
        """The rows at positions ``index`` (any shape ``S``) as a ``[*S, D]`` tensor."""
        raise NotImplementedError

    def tensor(self) -> Tensor:
        """All rows in one ``[N, D]`` tensor (``N·D`` memory: for sets that fit)."""
        return torch.cat(list(self.chunks()))


class TensorDescriptors(Descriptors):
    """An in-memory ``[N, D]`` tensor seen as a descriptor set (chunks are views, no copy)."""

    def __init__(self, embeddings: Tensor) -> None:
        if not isinstance(embeddings, Tensor) or embeddings.ndim != 2:
            shape = tuple(embeddings.shape) if isinstance(embeddings, Tensor) else type(embeddings).__name__
            raise ValueError(f"Descriptors must be a [N, D] tensor, got {shape}.")
        self.embeddings, (self.num_rows, self.dim) = embeddings, embeddings.shape

    def chunks(self, rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[Tensor]:
        yield from self.embeddings.split(rows)

    def take(self, index: Tensor) -> Tensor:
        return self.embeddings[index.to(self.embeddings.device)]

    def tensor(self) -> Tensor:
        return self.embeddings


class MappedDescriptors(Descriptors):
    """``fn`` applied row-wise to every chunk of ``source`` when it is read (e.g. a learnt whitening)."""

    def __init__(self, source: Descriptors, fn: Callable[[Tensor], Tensor], dim: int) -> None:
        self.source, self.fn, self.num_rows, self.dim = source, fn, source.num_rows, dim

    def chunks(self, rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[Tensor]:
        for chunk in self.source.chunks(rows):
            yield self.fn(chunk)

    def take(self, index: Tensor) -> Tensor:
        rows = self.source.take(index.reshape(-1))
        return self.fn(rows).reshape(*index.shape, self.dim)


class ConcatenatedDescriptors(Descriptors):
    """The rows of several sets one after the other (e.g. a gallery, then the R1M distractors on disk).

    Example:
        >>> both = ConcatenatedDescriptors([torch.zeros(2, 3), torch.ones(1, 3)])
        >>> both.num_rows, both.take(torch.tensor([2, 0])).tolist()
        (3, [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    """

    def __init__(self, parts: list[Tensor | Descriptors]) -> None:
        self.parts = [as_descriptors(part) for part in parts]
        if not self.parts or len({part.dim for part in self.parts}) != 1:
            raise ValueError(f"Concatenated sets need one descriptor size, got {[p.dim for p in self.parts]}.")
        self.dim, self.num_rows = self.parts[0].dim, sum(part.num_rows for part in self.parts)
        self._starts = torch.tensor([0] + [part.num_rows for part in self.parts]).cumsum(0)

    def chunks(self, rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[Tensor]:
        for part in self.parts:
            yield from part.chunks(rows)

    def take(self, index: Tensor) -> Tensor:
        flat = index.reshape(-1).cpu()
        part_of = torch.searchsorted(self._starts, flat, right=True) - 1
        out: Tensor | None = None
        for number in part_of.unique().tolist():
            selected = part_of == number
            rows = self.parts[number].take(flat[selected] - self._starts[number])
            out = rows.new_empty(flat.numel(), self.dim) if out is None else out
            out[selected] = rows.to(out.dtype)
        out = torch.zeros(0, self.dim) if out is None else out
        return out.reshape(*index.shape, self.dim)


def as_descriptors(descriptors: Tensor | Descriptors) -> Descriptors:
    """A tensor wrapped as :class:`TensorDescriptors`; a descriptor set as it is."""
    return descriptors if isinstance(descriptors, Descriptors) else TensorDescriptors(descriptors)


class DescriptorShards(Descriptors):
    """The descriptor set of a folder written by :class:`DescriptorWriter` (memory-mapped, read in order).

    Attributes:
        index: ``[N]`` dataset index of each row (rows in the writers' order, repeats dropped).
        labels: ``[N]`` or ``[N, L]`` labels, or ``None`` for an unlabelled set (read into memory on first use).
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        manifests = sorted(self.folder.glob("*.json")) if self.folder.is_dir() else []
        if not manifests:
            raise FileNotFoundError(
                f"{self.folder}: no descriptor manifest (<name>.json) found. Give the folder written by "
                "`ranklit predict --predictions_path FOLDER` (or its `query`/`gallery` sub-folder); a folder whose "
                "writer was interrupted has no manifest: run the prediction again."
            )
        stems: list[Path] = []
        dims = set()
        for meta in read_manifests(self.folder):
            dims.add(int(meta["dim"]))
            stems += [self.folder / shard["stem"] for shard in meta["shards"]]
        if len(dims) > 1:
            raise ValueError(f"{self.folder}: the writers' descriptors have different sizes {sorted(dims)}.")
        self._embeddings = [np.load(f"{stem}.embeddings.npy", mmap_mode="r") for stem in stems]
        self._stems = stems
        seen: set[int] = set()
        self._keep: list[np.ndarray] = []
        indices = []
        for stem in stems:  # the index arrays are small (8 bytes a row): kept in memory
            shard_index = np.load(f"{stem}.index.npy")
            keep = np.array([i not in seen for i in shard_index.tolist()], dtype=bool)
            seen.update(shard_index.tolist())
            self._keep.append(keep)
            indices.append(shard_index[keep])
        self.index = torch.from_numpy(np.concatenate(indices)) if indices else torch.zeros(0, dtype=torch.long)
        self.num_rows = int(self.index.numel())
        self.dim = dims.pop() if dims else 0
        self._offsets = np.cumsum([0] + [int(k.sum()) for k in self._keep])
        self._labels: Tensor | None = None

    @property
    def labels(self) -> Tensor | None:
        if self._labels is None and all(Path(f"{s}.labels.npy").is_file() for s in self._stems) and self._stems:
            parts = [np.load(f"{s}.labels.npy")[keep] for s, keep in zip(self._stems, self._keep, strict=True)]
            self._labels = torch.from_numpy(np.concatenate(parts))
        return self._labels

    def chunks(self, rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[Tensor]:
        # read with plain file reads, not through the memory map: mapped pages would stay in the resident set
        for embeddings, keep in zip(self._embeddings, self._keep, strict=True):
            with open(embeddings.filename, "rb") as handle:
                for start in range(0, embeddings.shape[0], rows):
                    count = min(rows, embeddings.shape[0] - start) * self.dim
                    handle.seek(embeddings.offset + start * self.dim * embeddings.itemsize)
                    block = np.fromfile(handle, dtype=embeddings.dtype, count=count).reshape(-1, self.dim)
                    yield torch.from_numpy(block[keep[start : start + rows]])

    def take(self, index: Tensor) -> Tensor:
        flat = index.reshape(-1).cpu().numpy()
        shard = np.searchsorted(self._offsets, flat, side="right") - 1
        out = np.empty((flat.size, self.dim), dtype=np.float32)
        for s in np.unique(shard):
            rows = flat[shard == s] - self._offsets[s]
            stored = np.flatnonzero(self._keep[s])[rows]  # positions in the shard file, repeats skipped
            out[shard == s] = self._embeddings[s][stored]
        return torch.from_numpy(out).reshape(*index.shape, self.dim)


def open_descriptors(path: str | Path) -> Descriptors:
    """The descriptor set at ``path``: a folder of shards (:class:`DescriptorShards`) or a ``.npy`` ``[N, D]`` array
    (read into memory)."""
    path = Path(path)
    if path.suffix == ".npy" and path.is_file():
        return TensorDescriptors(torch.from_numpy(np.load(path)))
    return DescriptorShards(path)


class DescriptorWriter:
    """Append descriptors to a folder as ``.npy`` shards of ``shard_rows`` rows (format: module docstring).

    Memory: one shard. The manifest is written at once, marked incomplete; :meth:`close` writes the last shard and
    the manifest marked complete (``complete=False``: a stopped writer, whose shards readers still refuse). ``run``
    (default: a new random id), ``group``, ``rank`` and ``ranks`` identify the prediction and its process (module
    docstring).

    Example:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> writer = DescriptorWriter(folder, shard_rows=2)
        >>> for start in range(0, 5, 2):
        ...     writer.append(torch.ones(min(2, 5 - start), 3), torch.arange(start, min(start + 2, 5)))
        >>> writer.close()
        >>> shards = DescriptorShards(folder)
        >>> shards.num_rows, shards.dim, len(shards._stems), shards.index.tolist()
        (5, 3, 3, [0, 1, 2, 3, 4])
    """

    def __init__(
        self,
        folder: str | Path,
        name: str = "rank0",
        *,
        shard_rows: int = DEFAULT_CHUNK_ROWS,
        run: str | None = None,
        group: str | None = None,
        rank: int = 0,
        ranks: int = 1,
    ) -> None:
        if shard_rows < 1:
            raise ValueError(f"`shard_rows` must be a positive number of rows, got {shard_rows}.")
        self.folder, self.name, self.shard_rows = Path(folder), name, shard_rows
        self.identity = {"run": run or uuid.uuid4().hex[:12], "group": name if group is None else group,
                         "rank": rank, "ranks": ranks}
        self.folder.mkdir(parents=True, exist_ok=True)
        self._buffer: list[tuple[Tensor, Tensor, Tensor | None]] = []
        self._buffered = 0
        self._shards: list[dict[str, int | str]] = []
        self.dim: int | None = None
        self._write_manifest(complete=False)  # the folder is refused by readers until closed

    def append(self, embeddings: Tensor, index: Tensor, labels: Tensor | None = None) -> None:
        """Add ``[B, D]`` descriptors with their ``[B]`` dataset indices (and labels); writes full shards."""
        if self.dim is None:
            self.dim = int(embeddings.shape[1])
        elif embeddings.shape[1] != self.dim:
            raise ValueError(f"Descriptors of size {embeddings.shape[1]} appended to a set of size {self.dim}.")
        detached = None if labels is None else labels.detach().cpu()
        self._buffer.append((embeddings.detach().float().cpu(), index.detach().long().cpu(), detached))
        self._buffered += embeddings.shape[0]
        while self._buffered >= self.shard_rows:
            self._flush(self.shard_rows)

    def _flush(self, rows: int) -> None:
        embeddings = torch.cat([b[0] for b in self._buffer])
        index = torch.cat([b[1] for b in self._buffer])
        label_parts = [b[2] for b in self._buffer if b[2] is not None]
        labels = torch.cat(label_parts) if label_parts else None
        stem = f"{self.name}-{self.identity['run']}-{len(self._shards):05d}"
        np.save(self.folder / f"{stem}.embeddings.npy", embeddings[:rows].numpy())
        np.save(self.folder / f"{stem}.index.npy", index[:rows].numpy())
        if labels is not None:
            np.save(self.folder / f"{stem}.labels.npy", labels[:rows].numpy())
        self._shards.append({"rows": int(min(rows, embeddings.shape[0])), "stem": stem})
        rest = (embeddings[rows:], index[rows:], None if labels is None else labels[rows:])
        self._buffer = [rest] if rest[0].shape[0] else []
        self._buffered = int(rest[0].shape[0])

    def close(self, complete: bool = True) -> None:
        """Write the last shard and the manifest (atomically: a reader sees all the shards or none), marked
        ``complete`` (``False``: a stopped writer)."""
        if self._buffered:
            self._flush(self._buffered)
        self._write_manifest(complete)

    def _write_manifest(self, complete: bool) -> None:
        manifest = {"format": FORMAT, "version": 2, "dim": self.dim or 0, **self.identity, "complete": complete,
                    "shards": self._shards}
        temporary = self.folder / f".{self.name}.json.tmp"
        temporary.write_text(json.dumps(manifest))
        temporary.replace(self.folder / f"{self.name}.json")
