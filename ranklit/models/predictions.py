"""``EmbeddingWriter``: save what ``ranklit predict`` computes (embeddings, labels, dataset indices) to one file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import BasePredictionWriter
from typing_extensions import override

__all__ = ["EmbeddingWriter", "load_predictions"]


def _concatenate(batches: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {key: torch.cat([b[key].detach().cpu() for b in batches]) for key in ("embeddings", "labels", "index")}


class EmbeddingWriter(BasePredictionWriter):
    """Write the predictions of an epoch to ``path`` with ``torch.save``.

    The file holds ``{"embeddings": [N, D], "labels": [N] or [N, L], "index": [N]}``; with a query/gallery
    evaluation it holds ``{"query": {...}, "gallery": {...}}``. Under DDP every rank writes its own shard,
    ``<stem>.rank<r><suffix>`` (the ``index`` field says which samples it holds). Load with :func:`load_predictions`.
    """

    def __init__(self, path: str = "predictions.pt") -> None:
        super().__init__(write_interval="epoch")
        self.path = Path(path)

    @override
    def write_on_epoch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, predictions: Sequence[Any], batch_indices: Any
    ) -> None:
        if predictions and isinstance(predictions[0], dict):
            content: dict[str, Any] = _concatenate(predictions)
        else:
            # strict=False: a predict run with only a query set has one dataloader
            content = dict(zip(("query", "gallery"), (_concatenate(p) for p in predictions), strict=False))
        path = self.path
        if trainer.world_size > 1:
            path = path.with_name(f"{path.stem}.rank{trainer.global_rank}{path.suffix}")
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(content, path)


def load_predictions(path: str | Path) -> dict[str, Any]:
    """Load a file written by :class:`EmbeddingWriter` (tensors only, safe to load)."""
    return torch.load(path, weights_only=True)
