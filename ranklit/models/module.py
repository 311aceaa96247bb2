"""``RetrievalModule``: the LightningModule that trains an embedding network with a ranking loss."""

from __future__ import annotations

from typing import Any

import lightning as L
import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor, nn
from typing_extensions import override

from ranklit.metrics import RetrievalMetrics

__all__ = ["RetrievalModule"]


class RetrievalModule(L.LightningModule):
    """Embedding network + ranking loss + retrieval metrics.

    Training: each batch ``{"image", "label", "index"}`` is embedded and the loss ranks every query against the
    batch without itself. Under DDP with ``gather=True`` (default) every rank ranks its queries against the
    embeddings of all ranks, gathered with gradients (``all_gather(..., sync_grads=True)``) and the query excluded by
    its global sample index: the gradient equals that of one process with the global batch (SPEC.md §3).

    Validation and test feed :class:`ranklit.metrics.RetrievalMetrics` and log ``val/<key>`` / ``test/<key>``
    (mAP, mAP@R, P@1, R@k; with hierarchical labels also H-AP, ASI, NDCG and per-level metrics). With a gallery
    dataloader (index 1) evaluation is query/gallery. A non-finite training loss stops the run with a message naming
    the step.

    Args:
        net: the embedding network (e.g. :class:`ranklit.models.EmbeddingNet`); must output L2-normalised embeddings.
        loss: any ranklit loss, called as ``loss(embeddings, labels, *, ref_embeddings, ref_labels, ids, ref_ids)``.
        optimizer: optimizer factory called with the parameter groups ``backbone``, ``head`` and ``loss``.
        lr_scheduler: optional scheduler factory (stepped once per epoch).
        head_lr: learning rate of the head (pooling, LayerNorm, linear layer); ``None`` = the optimizer's.
        loss_lr: learning rate of the loss's own parameters (proxies); ``None`` = the optimizer's.
        recall_at: the ``k`` of the logged Recall@k.
        hap_alpha: ``alpha`` of the H-AP relevance in the logged metrics.
        gather: under DDP, rank against the retrieval set gathered from all ranks.
    """

    def __init__(
        self,
        net: nn.Module,
        loss: nn.Module,
        optimizer: OptimizerCallable = torch.optim.Adam,
        lr_scheduler: LRSchedulerCallable | None = None,
        head_lr: float | None = None,
        loss_lr: float | None = None,
        recall_at: tuple[int, ...] = (1, 2, 4, 8),
        hap_alpha: float = 1.0,
        gather: bool = True,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["net", "loss"])
        self.net = net
        self.loss = loss
        self.optimizer_factory = optimizer
        self.scheduler_factory = lr_scheduler
        self.val_metrics = RetrievalMetrics(recall_at=recall_at, alpha=hap_alpha)
        self.test_metrics = RetrievalMetrics(recall_at=recall_at, alpha=hap_alpha)

    @override
    def forward(self, images: Tensor) -> Tensor:
        return self.net(images)

    def _retrieval_set(self, embeddings: Tensor, labels: Tensor, ids: Tensor) -> dict[str, Tensor]:
        """Keyword arguments giving the loss its retrieval set: the whole DDP batch when gathering, else the batch."""
        if not self.hparams.gather or self.trainer.world_size == 1:
            return {}
        gathered = [self.all_gather(t, sync_grads=t is embeddings) for t in (embeddings, labels, ids)]
        ref_embeddings, ref_labels, ref_ids = (t.flatten(0, 1) for t in gathered)
        return {"ref_embeddings": ref_embeddings, "ref_labels": ref_labels, "ids": ids, "ref_ids": ref_ids}

    @override
    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        embeddings = self.net(batch["image"])
        loss = self.loss(embeddings, batch["label"], **self._retrieval_set(embeddings, batch["label"], batch["index"]))
        if not torch.isfinite(loss):
            raise FloatingPointError(
                f"The training loss ({type(self.loss).__name__}) is {loss.item()} at global step {self.global_step} "
                f"(epoch {self.current_epoch}, batch {batch_idx}). Lower the learning rate, check the data, or try "
                "`--trainer.precision 32`."
            )
        self.log("train/loss", loss, prog_bar=True, batch_size=embeddings.shape[0])
        return loss

    def _update(self, metrics: RetrievalMetrics, batch: dict[str, Tensor], dataloader_idx: int) -> None:
        metrics.update(self.net(batch["image"]), batch["label"], batch["index"], gallery=dataloader_idx == 1)

    def _log_metrics(self, metrics: RetrievalMetrics, prefix: str) -> None:
        results = metrics.compute()
        metrics.reset()
        for key, value in results.items():
            self.log(f"{prefix}/{key}", float(value), prog_bar=key in ("map_at_r", "hap"))

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
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": self.scheduler_factory(optimizer)}}
