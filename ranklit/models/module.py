"""``RetrievalModule``: the LightningModule that trains an embedding network with a ranking loss."""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Literal

import lightning as L
import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor, nn
from typing_extensions import override

from ranklit.metrics import DecomposabilityGap, RetrievalMetrics
from ranklit.training.manual import manual_optimization_step, prepare_ddp, step_lr_schedulers
from ranklit.training.memory import CrossBatchMemory
from ranklit.training.multistage import multistage_backward
from ranklit.training.objective import ranking_objective

__all__ = ["RetrievalModule"]

_INJECTED = ["net", "loss", "memory", "optimizer", "lr_scheduler"]


def _objects_not_saved_in_hparams() -> list[str]:
    """The injected arguments to leave out of ``hparams``, so checkpoints load with ``weights_only=True``.

    Under the ``ranklit`` CLI, Lightning saves the parsed config (``class_path``/``init_args`` dicts) instead of the
    objects, and ``RetrievalModule.load_from_checkpoint(path)`` rebuilds everything from it: keep them all. From
    Python, pass ``net``, ``loss`` (and ``memory``) again: ``RetrievalModule.load_from_checkpoint(path, net=..., loss=...)``.
    """
    from lightning.pytorch.core.mixins.hparams_mixin import _given_hyperparameters

    return [] if _given_hyperparameters.get() is not None else _INJECTED


def _drop_unaccepted_linked_values(hparams: Any) -> None:
    """Remove the CLI's linked ``num_classes``/``embedding_dim`` from the saved config of a loss that takes neither.

    The CLI links them into ``model.loss.init_args`` for every loss; Lightning records the linked values even for a
    loss without those arguments, which would make ``--ckpt_path`` and ``load_from_checkpoint`` reject the config.
    """
    loss = hparams.get("loss")
    if not (isinstance(loss, dict) and "class_path" in loss and isinstance(loss.get("init_args"), dict)):
        return
    module_name, _, class_name = loss["class_path"].rpartition(".")
    accepted = inspect.signature(getattr(importlib.import_module(module_name), class_name)).parameters
    for key in ("num_classes", "embedding_dim"):
        if key not in accepted:
            loss["init_args"].pop(key, None)


class RetrievalModule(L.LightningModule):
    """Embedding network + ranking loss + retrieval metrics.

    Training: each batch ``{"image", "label", "index"}`` is embedded and the loss ranks every query against the
    batch without itself (excluded by sample index). Under DDP with ``gather=True`` (default) every rank ranks its
    queries against the embeddings of all ranks, gathered with gradients (``all_gather(..., sync_grads=True)``) and
    the query excluded by its global sample index: the gradient equals that of one process with the global batch
    (SPEC.md §3). With a ``memory`` the queries are also ranked against past batches (XBM). With
    ``multistage_chunk_size`` a batch of any size is trained with the exact full-batch gradient, ``chunk_size``
    images at a time (:mod:`ranklit.training.multistage`). The loss is computed in float32 with autocast off, so
    ``--trainer.precision bf16-mixed`` only affects the network. See :func:`ranklit.training.ranking_objective`.

    **Multistage mode** uses Lightning's manual optimisation (one optimiser step per batch): Lightning rejects
    ``trainer.gradient_clip_val`` and ``accumulate_grad_batches`` there, so clip with
    ``multistage_gradient_clip_val`` (global norm); schedulers are stepped at their ``interval``/``frequency`` as in
    automatic mode; under DDP gradients are averaged once per batch (:mod:`ranklit.training.manual`).

    Validation and test feed :class:`ranklit.metrics.RetrievalMetrics` and log ``val/<key>`` / ``test/<key>``
    (mAP, mAP@R, P@1, R@k; with hierarchical labels also H-AP, ASI, NDCG and per-level metrics). With a gallery
    dataloader (index 1) evaluation is query/gallery. A non-finite training loss stops the run with a message naming
    the step.

    Args:
        net: the embedding network (e.g. :class:`ranklit.models.EmbeddingNet`); must output L2-normalised embeddings.
        loss: any ranklit loss, called as ``loss(embeddings, labels, *, ref_embeddings, ref_labels, ids, ref_ids)``.
        optimizer: optimizer factory called with the parameter groups ``backbone``, ``head`` and ``loss``.
        lr_scheduler: optional scheduler factory.
        lr_scheduler_interval: step the scheduler after every ``"epoch"`` or after every optimiser ``"step"``.
        head_lr: learning rate of the head (pooling, LayerNorm, linear layer); ``None`` = the optimizer's.
        loss_lr: learning rate of the loss's own parameters (proxies); ``None`` = the optimizer's.
        recall_at: the ``k`` of the logged Recall@k.
        hap_alpha: ``alpha`` of the H-AP relevance in the logged metrics.
        gather: under DDP, rank against the retrieval set gathered from all ranks.
        memory: a :class:`ranklit.training.CrossBatchMemory` (size, start step, weight), or ``None``.
        multistage_chunk_size: images per forward pass with activations for multistage backprop; ``None`` = plain
            backprop of the whole batch.
        multistage_gradient_clip_val: maximum global gradient norm in multistage mode (``None`` = no clipping).
        decomposability_gap: log ``train/batch_map``, ``train/map`` and ``train/decomposability_gap`` every epoch
            (:class:`ranklit.metrics.DecomposabilityGap`: the batch AP of what the loss ranks against the AP over
            the epoch's samples); stores the epoch's embeddings.
    """

    def __init__(
        self,
        net: nn.Module,
        loss: nn.Module,
        optimizer: OptimizerCallable = torch.optim.Adam,
        lr_scheduler: LRSchedulerCallable | None = None,
        lr_scheduler_interval: Literal["epoch", "step"] = "epoch",
        head_lr: float | None = None,
        loss_lr: float | None = None,
        recall_at: tuple[int, ...] = (1, 2, 4, 8),
        hap_alpha: float = 1.0,
        gather: bool = True,
        memory: CrossBatchMemory | None = None,
        multistage_chunk_size: int | None = None,
        multistage_gradient_clip_val: float | None = None,
        decomposability_gap: bool = False,
    ) -> None:
        super().__init__()
        chunk = multistage_chunk_size
        if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1):
            raise ValueError(f"`multistage_chunk_size` must be a positive integer or None (plain backprop), got {chunk!r}.")
        if lr_scheduler_interval not in ("epoch", "step"):
            raise ValueError(f"`lr_scheduler_interval` must be 'epoch' or 'step', got {lr_scheduler_interval!r}.")
        if multistage_gradient_clip_val is not None and multistage_chunk_size is None:
            raise ValueError(
                "`multistage_gradient_clip_val` only applies with `multistage_chunk_size`; without multistage backprop "
                "use `trainer.gradient_clip_val`."
            )
        self.save_hyperparameters(ignore=_objects_not_saved_in_hparams())
        _drop_unaccepted_linked_values(self.hparams)
        self.net = net
        self.loss = loss
        self.memory = memory
        self.optimizer_factory = optimizer
        self.scheduler_factory = lr_scheduler
        self.automatic_optimization = multistage_chunk_size is None
        self.val_metrics = RetrievalMetrics(recall_at=recall_at, alpha=hap_alpha)
        self.test_metrics = RetrievalMetrics(recall_at=recall_at, alpha=hap_alpha)
        self.train_gap = DecomposabilityGap() if decomposability_gap else None

    @override
    def forward(self, images: Tensor) -> Tensor:
        return self.net(images)

    def _objective(self, embeddings: Tensor, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        labels, ids = batch["label"], batch["index"]
        objective = ranking_objective(
            self.loss, embeddings, labels, ids, gather=self.hparams.gather, memory=self.memory, step=self.global_step
        )
        loss = objective.loss
        if not torch.isfinite(loss):
            raise FloatingPointError(
                f"The training loss ({type(self.loss).__name__}) is {loss.item()} at global step {self.global_step} "
                f"(epoch {self.current_epoch}, batch {batch_idx}). Lower the learning rate, check the data, or try "
                "`--trainer.precision 32`."
            )
        if self.train_gap is not None:
            refs = objective.ref_embeddings.detach(), objective.ref_labels, objective.ref_ids
            self.train_gap.update(embeddings, labels, ids, ref_embeddings=refs[0], ref_labels=refs[1], ref_ids=refs[2])
        return loss

    @override
    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        images = batch["image"]
        if self.automatic_optimization:
            loss = self._objective(self.net(images), batch, batch_idx)
        else:
            clip_val = self.hparams.multistage_gradient_clip_val
            loss = manual_optimization_step(self, lambda: self._multistage(batch, batch_idx), batch_idx, clip_val)
        self.log("train/loss", loss, prog_bar=True, batch_size=images.shape[0])
        return loss

    def _multistage(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        loss, _ = multistage_backward(
            self.net,
            batch["image"],
            lambda embeddings: self._objective(embeddings, batch, batch_idx),
            self.hparams.multistage_chunk_size,
            backward=self.manual_backward,
        )
        return loss

    @override
    def on_train_start(self) -> None:
        if not self.automatic_optimization:
            prepare_ddp(self.trainer)

    @override
    def on_train_epoch_end(self) -> None:
        if not self.automatic_optimization:
            step_lr_schedulers(self, "epoch")
        if self.train_gap is not None:
            gap = self.train_gap.compute()
            self.train_gap.reset()
            for key, name in (("batch_map", "batch_map"), ("map", "map"), ("gap", "decomposability_gap")):
                self.log(f"train/{name}", gap[key], sync_dist=True)  # equal on every rank: the mean changes nothing

    def _update(self, metrics: RetrievalMetrics, batch: dict[str, Tensor], dataloader_idx: int) -> None:
        metrics.update(self.net(batch["image"]), batch["label"], batch["index"], gallery=dataloader_idx == 1)

    def _log_metrics(self, metrics: RetrievalMetrics, prefix: str) -> None:
        results = metrics.compute()
        metrics.reset()
        for key, value in results.items():
            # computed from the gathered states, so equal on every rank; sync_dist only silences Lightning's warning
            self.log(f"{prefix}/{key}", float(value), prog_bar=key in ("map_at_r", "hap"), sync_dist=True)

    @override
    def validation_step(self, batch: dict[str, Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        self._update(self.val_metrics, batch, dataloader_idx)

    @override
    def on_validation_epoch_end(self) -> None:
        self._log_metrics(self.val_metrics, "val")

    @override
    def test_step(self, batch: dict[str, Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        self._update(self.test_metrics, batch, dataloader_idx)

    @override
    def on_test_epoch_end(self) -> None:
        self._log_metrics(self.test_metrics, "test")

    @override
    def predict_step(self, batch: dict[str, Tensor], batch_idx: int, dataloader_idx: int = 0) -> dict[str, Tensor]:
        return {"embeddings": self.net(batch["image"]), "labels": batch["label"], "index": batch["index"]}

    def _parameter_groups(self) -> list[dict[str, Any]]:
        head = list(self.net.head_parameters()) if hasattr(self.net, "head_parameters") else []
        head_ids = {id(p) for p in head}
        backbone = [p for p in self.net.parameters() if id(p) not in head_ids]
        groups = [
            {"name": "backbone", "params": backbone},
            {"name": "head", "params": head, "lr": self.hparams.head_lr},
            {"name": "loss", "params": list(self.loss.parameters()), "lr": self.hparams.loss_lr},
        ]
        groups = [{k: v for k, v in g.items() if v is not None} for g in groups]
        return [g for g in groups if any(p.requires_grad for p in g["params"])]

    @override
    def configure_optimizers(self) -> Any:
        optimizer = self.optimizer_factory(self._parameter_groups())
        if self.scheduler_factory is None:
            return optimizer
        scheduler = {"scheduler": self.scheduler_factory(optimizer), "interval": self.hparams.lr_scheduler_interval}
        return {"optimizer": optimizer, "lr_scheduler": scheduler}
