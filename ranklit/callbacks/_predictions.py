"""``EmbeddingWriter``: write what ``ranklit predict`` computes (embeddings, labels, indices) to disk as it goes.

The format is numpy ``.npy`` shards with a JSON manifest, read back through memory maps
(:mod:`ranklit.landmarks.descriptors`): a set of any size is written with the memory of one shard and streamed by
the evaluation, the whitening and α-QE (:mod:`ranklit.landmarks.postprocess`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import BasePredictionWriter
from typing_extensions import override

from ranklit.landmarks.descriptors import DEFAULT_CHUNK_ROWS, DescriptorShards, DescriptorWriter

__all__ = ["EmbeddingWriter", "load_predictions"]

_ROLES = ("query", "gallery")


class EmbeddingWriter(BasePredictionWriter):
    """Write each predicted batch to the folder ``path`` as numpy shards of ``shard_rows`` rows.

    Layout: ``path/`` holds the shards of the predicted set (format: :mod:`ranklit.landmarks.descriptors`); with a
    query/gallery evaluation, ``path/query/`` and ``path/gallery/``. Under DDP every rank writes its own shards and
    manifest (``rank<r>``); readers merge them and drop the sampler's padding repeats by dataset index. A folder is
    readable once its manifests are written, at the end of the epoch. ``prefix`` starts the writers' names
    (``<prefix>rank<r>``): several predictions into one folder (the blocks of ``ranklit index``) read as one set.
    Read it with :func:`load_predictions` (into memory) or :class:`ranklit.landmarks.descriptors.DescriptorShards`
    (memory-mapped).
    """

    def __init__(self, path: str = "predictions", shard_rows: int = DEFAULT_CHUNK_ROWS, prefix: str = "") -> None:
        super().__init__(write_interval="batch")
        self.path, self.shard_rows, self.prefix = Path(path), shard_rows, prefix
        self._writers: dict[int, DescriptorWriter] = {}

    def _writer(self, trainer: L.Trainer, dataloader_idx: int) -> DescriptorWriter:
        if dataloader_idx not in self._writers:
            several = len(trainer.num_predict_batches) > 1
            folder = self.path / _ROLES[dataloader_idx] if several else self.path
            name = f"{self.prefix}rank{trainer.global_rank}"
            self._writers[dataloader_idx] = DescriptorWriter(folder, name, shard_rows=self.shard_rows)
        return self._writers[dataloader_idx]

    @override
    def write_on_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        prediction: Any,
        batch_indices: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int,
    ) -> None:
        writer = self._writer(trainer, dataloader_idx)
        writer.append(prediction["embeddings"], prediction["index"], prediction["labels"])

    @override
    def on_predict_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        for writer in self._writers.values():
            writer.close()
        self._writers = {}


def load_predictions(path: str | Path) -> dict[str, Any]:
    """Read a folder written by :class:`EmbeddingWriter` into memory, rows in dataset-index order.

    Returns ``{"embeddings": [N, D], "labels": [N] or [N, L], "index": [N]}``, or ``{"query": {...}, "gallery":
    {...}}`` for a query/gallery prediction. For sets bigger than memory use
    :class:`ranklit.landmarks.descriptors.DescriptorShards` instead.
    """
    path = Path(path)
    if all((path / role).is_dir() for role in _ROLES):
        return {role: load_predictions(path / role) for role in _ROLES}
    shards = DescriptorShards(path)
    order = torch.argsort(shards.index)
    labels = shards.labels
    return {
        "embeddings": shards.tensor()[order],
        "labels": labels[order] if labels is not None else None,
        "index": shards.index[order],
    }
