"""A minimal LightningModule (no ranklit model) that validates with ``RetrievalMetrics`` in a ``MetricCollection``.

Run as ``python -m tests.metrics.lightning_ddp_worker OUT.json``: Lightning's ``ddp`` strategy re-launches this
command for rank 1. Dataloader 0 (37 items: DistributedSampler pads one duplicate) feeds a collection updated through
forward with ids; dataloader 1 (40 items, no padding) one updated without ids. Rank 0 writes what was logged.
"""

from __future__ import annotations

import json
import sys
import warnings

import torch
from lightning.pytorch import LightningModule, Trainer
from torch.utils.data import DataLoader, TensorDataset
from torchmetrics import MetricCollection

from ranklit.metrics import RetrievalMetrics

SIZES = (37, 40)


def data(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` raw 6-d inputs and 2-level labels."""
    g = torch.Generator().manual_seed(n)
    fine = torch.randint(0, 8, (n,), generator=g)
    return torch.randn(n, 6, generator=g), torch.stack([fine, fine // 3], 1)


def network() -> torch.nn.Linear:
    """The embedding network: raw, unnormalised features."""
    torch.manual_seed(0)
    return torch.nn.Linear(6, 5, bias=False)


class Module(LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = network()
        self.with_ids = MetricCollection({"retrieval": RetrievalMetrics(recall_at=(1, 4))}, prefix="ids_")
        self.without_ids = MetricCollection({"retrieval": RetrievalMetrics(recall_at=(1, 4))}, prefix="noids_")

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        x, labels, index = batch
        if dataloader_idx == 0:
            batch_values = self.with_ids(self.net(x), labels, index)  # forward: batch values, state kept
            assert set(batch_values) >= {"ids_map", "ids_num_queries"}
        else:
            self.without_ids.update(self.net(x), labels)

    def on_validation_epoch_end(self) -> None:
        self.log_dict(self.with_ids.compute(), sync_dist=True)
        self.log_dict(self.without_ids.compute(), sync_dist=True)
        self.with_ids.reset()
        self.without_ids.reset()


def main(out_path: str) -> None:
    torch.set_num_threads(1)
    loaders = []
    for n in SIZES:
        x, labels = data(n)
        loaders.append(DataLoader(TensorDataset(x, labels, torch.arange(n)), batch_size=6))
    trainer = Trainer(
        accelerator="cpu", devices=2, strategy="ddp", logger=False, enable_progress_bar=False,
        enable_model_summary=False, enable_checkpointing=False,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.validate(Module(), loaders, verbose=False)
    if trainer.global_rank == 0:
        logged = {key.split("/")[0]: float(value) for key, value in trainer.callback_metrics.items()}
        messages = [str(w.message) for w in caught]
        with open(out_path, "w") as f:
            json.dump({"logged": logged, "warnings": messages}, f)


if __name__ == "__main__":
    main(sys.argv[1])
