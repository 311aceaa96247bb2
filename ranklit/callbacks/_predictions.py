"""``EmbeddingWriter``: write what ``ranklit predict`` computes (embeddings, labels, indices) to disk as it goes.

The format is numpy ``.npy`` shards with a JSON manifest, read back through memory maps
(:mod:`ranklit.index.descriptors`): a set of any size is written with the memory of one shard and streamed by
the evaluation, the whitening and α-QE (:mod:`ranklit.landmarks.postprocess`).
"""

from __future__ import annotations

import shutil
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import BasePredictionWriter
from lightning.pytorch.utilities.exceptions import SIGTERMException
from typing_extensions import override

from ranklit.errors import UserError
from ranklit.index import DEFAULT_CHUNK_ROWS, DescriptorShards, DescriptorWriter, owned_files
from ranklit.training.stops import StopSignals, agree_to_stop, mark_stopped, stop_requested

__all__ = ["EmbeddingWriter", "count_rows", "load_predictions"]

_ROLES = ("query", "gallery")


class EmbeddingWriter(BasePredictionWriter):
    """Write each predicted batch to the folder ``path`` as numpy shards of ``shard_rows`` rows.

    Layout: ``path/`` holds the shards of the predicted set (format: :mod:`ranklit.index.descriptors`); with a
    query/gallery evaluation, ``path/query/`` and ``path/gallery/``. Under DDP every rank writes its own shards and
    manifest (``rank<r>``); readers merge them and drop the sampler's padding repeats by dataset index. A folder is
    readable once its manifests are marked complete, at the end of the epoch. ``prefix`` starts the writers' names
    (``<prefix>rank<r>``): several predictions into one folder (the blocks of ``ranklit index``) read as one set.
    Read it with :func:`load_predictions` (into memory) or :class:`ranklit.index.descriptors.DescriptorShards`
    (memory-mapped).

    **One run per folder.** Each prediction draws a run identity (broadcast from rank 0), written into its manifests
    and shard names, so that readers never mix two predictions. A folder already holding output of this writer's
    ``prefix`` (its ``.json``/``.npy`` files, those of ``query/`` and ``gallery/`` too) is refused before anything
    is written (:class:`ranklit.errors.UserError`), or, with ``overwrite=True``, those files are deleted first.

    **Stops.** ``SIGTERM`` or Ctrl-C (``SIGINT``) stops the prediction after the current batch on every process
    (:mod:`ranklit.training.stops`): the manifests are written marked incomplete (readers refuse the folder) and the
    ``ranklit`` command exits with ``128 + signal`` (143, 130). A stopped prediction is not resumed: run it again
    with ``overwrite=True``; the message says so, or ``rerun`` (what the caller's re-run is: ``ranklit index``
    continues its blocks).
    """

    def __init__(
        self,
        path: str = "predictions",
        shard_rows: int = DEFAULT_CHUNK_ROWS,
        prefix: str = "",
        overwrite: bool = False,
        rerun: str = "run the command again with `--overwrite true`",
    ) -> None:
        super().__init__(write_interval="batch")
        self.path, self.shard_rows, self.prefix, self.overwrite = Path(path), shard_rows, prefix, overwrite
        self.rerun = rerun
        self._writers: dict[int, DescriptorWriter] = {}
        self._run_id = ""

    def _folders(self) -> list[Path]:
        return [self.path, *(self.path / role for role in _ROLES)] if not self.prefix else [self.path]

    def _clear(self) -> str | None:
        """On rank 0: the refusal of a folder holding output (``None`` when it holds none or it was deleted)."""
        found = [file for folder in self._folders() for file in owned_files(folder, self.prefix)]
        if found and not self.overwrite:
            return self._refusal(found)
        for file in found:
            file.unlink(missing_ok=True)
        for folder in self._folders()[1:]:
            if folder.is_dir() and not any(folder.iterdir()):
                shutil.rmtree(folder)
        return None

    def check_free(self) -> None:
        """Raise the refusal of a folder holding predictions now, before a run folder is made (reads only: any
        process may call it; :meth:`setup` decides again on rank 0 and deletes with ``overwrite``)."""
        found = [file for folder in self._folders() for file in owned_files(folder, self.prefix)]
        if found and not self.overwrite:
            raise UserError(self._refusal(found))

    def _refusal(self, found: list[Path]) -> str:
        more = f" and {len(found) - 1} more files" if len(found) > 1 else ""
        return (
            f"{self.path} already holds predictions ({found[0].name}{more}): give another folder "
            "(`--predictions_path`), or replace them with `--overwrite true`."
        )

    @override
    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if stage != "predict":
            return
        StopSignals.install(trainer)  # before Lightning registers its handlers: a signal only records a request
        mark_stopped(None)
        decided = (self._clear(), uuid.uuid4().hex[:12]) if trainer.is_global_zero else (None, "")
        refusal, self._run_id = trainer.strategy.broadcast(decided, src=0)
        self._writers = {}
        if refusal:
            raise UserError(refusal)

    def _writer(self, trainer: L.Trainer, dataloader_idx: int) -> DescriptorWriter:
        if dataloader_idx not in self._writers:
            several = len(trainer.num_predict_batches) > 1
            folder = self.path / _ROLES[dataloader_idx] if several else self.path
            name = f"{self.prefix}rank{trainer.global_rank}"
            self._writers[dataloader_idx] = DescriptorWriter(
                folder, name, shard_rows=self.shard_rows, run=self._run_id, group=self.prefix,
                rank=trainer.global_rank, ranks=trainer.world_size,
            )
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
        if agree_to_stop(trainer):  # one all_reduce of an integer per batch under DDP
            self._close(complete=False)
            signum = stop_requested() or signal.SIGTERM
            mark_stopped(signum)
            if trainer.is_global_zero:
                sys.stderr.write(
                    f"{signal.Signals(signum).name}: prediction stopped after batch {batch_idx + 1}; {self.path} is "
                    f"marked incomplete (readers refuse it): {self.rerun}.\n"
                )
            raise SIGTERMException  # a SystemExit: the `ranklit` command turns it into 128 + signal

    def _close(self, complete: bool) -> None:
        for writer in self._writers.values():
            writer.close(complete)
        self._writers = {}

    @override
    def on_predict_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._close(complete=True)
        trainer.strategy.barrier("ranklit-predictions-written")  # every rank's manifest is complete from here on

    @override
    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self._close(complete=False)  # e.g. a second Ctrl-C: the shards written so far, named, marked incomplete
        if isinstance(exception, KeyboardInterrupt):
            mark_stopped(signal.SIGINT)


def load_predictions(path: str | Path) -> dict[str, Any]:
    """Read a folder written by :class:`EmbeddingWriter` into memory, rows in dataset-index order.

    Returns ``{"embeddings": [N, D], "labels": [N] or [N, L], "index": [N]}``, or ``{"query": {...}, "gallery":
    {...}}`` for a query/gallery prediction. For sets bigger than memory use
    :class:`ranklit.index.descriptors.DescriptorShards` instead.
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


def count_rows(path: str | Path) -> int:
    """The number of rows (distinct dataset indices) of a folder written by :class:`EmbeddingWriter`, its
    ``query``/``gallery`` sub-folders added up; the folder is checked as by :func:`load_predictions`."""
    path = Path(path)
    if all((path / role).is_dir() for role in _ROLES):
        return sum(count_rows(path / role) for role in _ROLES)
    return DescriptorShards(path).num_rows
