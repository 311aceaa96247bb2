"""``RankingGridLogger``: log a grid of validation queries and their top-k to Weights & Biases after validation."""

from __future__ import annotations

from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import WandbLogger
from matplotlib.figure import Figure
from torch import Tensor
from typing_extensions import override

from ranklit._checks import check_positive_int
from ranklit.viz import dataset_images, figure_to_array, ranking_grid, retrieve

__all__ = ["RankingGridLogger"]



class RankingGridLogger(Callback):
    """At the end of validation, log ``num_queries`` fixed validation queries and their ``top_k`` as one image.

    Each row is a query and its nearest items in the validation set (itself excluded; the gallery when the
    datamodule evaluates query/gallery), framed green (same fine class), orange (same coarser class only) or red
    (see :func:`ranklit.viz.ranking_grid`). The queries are the same every epoch: evenly spaced in dataset order.
    The image goes to every :class:`~lightning.pytorch.loggers.WandbLogger` of the trainer under ``key``, at the
    current global step; with no such logger (CSV, TensorBoard, none) the callback does nothing and costs nothing.

    Cost, on epochs where it logs: one extra forward pass over each validation batch (the embeddings are recomputed
    under ``torch.no_grad`` and kept on the CPU, ``N x D`` floats), a ``[num_queries, N]`` score matrix and the
    loading of ``num_queries x (top_k + 1)`` images. Under DDP only rank 0 logs, with the items rank 0 validated.
    Batches must be ranklit's dictionaries ``{"image", "label", "index"}``; images are un-normalised with the
    datamodule's ``mean``/``std`` when it has them.

    Args:
        num_queries: rows of the grid.
        top_k: retrieved items per query.
        every_n_epochs: log on validation runs of epochs divisible by this (the validation before training included).
        key: the image's name in the logger.

    Example:
        >>> callback = RankingGridLogger(num_queries=4, top_k=3)
        >>> trainer = L.Trainer(callbacks=[callback], logger=False, enable_progress_bar=False)
        >>> callback in trainer.callbacks
        True
    """

    def __init__(
        self, num_queries: int = 8, top_k: int = 5, every_n_epochs: int = 1, key: str = "val/rankings"
    ) -> None:
        self.num_queries = check_positive_int("num_queries", num_queries)
        self.top_k = check_positive_int("top_k", top_k)
        self.every_n_epochs = check_positive_int("every_n_epochs", every_n_epochs)
        self.key = key
        self._store: dict[int, list[tuple[Tensor, Tensor, Tensor]]] = {}
        self._active = False

    @staticmethod
    def _wandb_loggers(trainer: L.Trainer) -> list[WandbLogger]:
        return [logger for logger in trainer.loggers if isinstance(logger, WandbLogger)]

    @override
    def on_validation_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._store = {}
        self._active = (
            not trainer.sanity_checking
            and trainer.is_global_zero
            and trainer.current_epoch % self.every_n_epochs == 0
            and bool(self._wandb_loggers(trainer))
        )

    @override
    def on_validation_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if not self._active:
            return
        if not isinstance(batch, dict) or not {"image", "label", "index"} <= batch.keys():
            raise TypeError(
                "RankingGridLogger needs validation batches as dictionaries with keys 'image', 'label' and 'index' "
                f"(ranklit's datasets), got {type(batch).__name__}; remove the callback for other data."
            )
        with torch.no_grad():
            embeddings = pl_module(batch["image"])
        item = (embeddings.detach().float().cpu(), batch["label"].cpu(), batch["index"].cpu())
        self._store.setdefault(dataloader_idx, []).append(item)

    @override
    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not self._active or 0 not in self._store:
            return
        image = figure_to_array(self._figure(trainer), dpi=80)
        for logger in self._wandb_loggers(trainer):
            logger.log_image(key=self.key, images=[image], step=trainer.global_step)
        self._store = {}

    def _collected(self, dataloader_idx: int) -> tuple[Tensor, Tensor, Tensor]:
        """The items seen on one dataloader, in increasing id order, each id once (samplers may pad with repeats)."""
        embeddings, labels, ids = (torch.cat(parts) for parts in zip(*self._store[dataloader_idx], strict=True))
        sorted_ids, order = ids.sort(stable=True)
        keep = order[torch.cat([sorted_ids.new_ones(1, dtype=torch.bool), sorted_ids[1:] != sorted_ids[:-1]])]
        return embeddings[keep], labels[keep], ids[keep]

    def _figure(self, trainer: L.Trainer) -> Figure:
        loaders = trainer.val_dataloaders
        loaders = loaders if isinstance(loaders, (list, tuple)) else [loaders]
        embeddings, labels, ids = self._collected(0)
        picks = torch.linspace(0, len(ids) - 1, min(self.num_queries, len(ids))).round().long().unique()
        if 1 in self._store:  # query/gallery: the gallery is the retrieval set, nothing is excluded
            refs, ref_labels, ref_ids = self._collected(1)
            exclusion: dict[str, Tensor] = {}
            ref_dataset = loaders[1].dataset
        else:
            refs, ref_labels, ref_ids = embeddings, labels, ids
            exclusion = {"ids": ids[picks], "ref_ids": ids}
            ref_dataset = loaders[0].dataset
        available = len(ref_ids) - (1 if exclusion else 0)
        retrieved = retrieve(
            embeddings[picks], labels[picks], ref_embeddings=refs, ref_labels=ref_labels,
            top_k=min(self.top_k, available), **exclusion,
        )
        datamodule = getattr(trainer, "datamodule", None)
        return ranking_grid(
            dataset_images(loaders[0].dataset, ids[picks]),
            retrieved,
            lambda positions: dataset_images(ref_dataset, ref_ids[positions]),
            titles=[f"epoch {trainer.current_epoch}, step {trainer.global_step}"],
            mean=getattr(datamodule, "mean", None),
            std=getattr(datamodule, "std", None),
        )
