"""The data path a GPU run expects: pinned memory when the trainer's device is CUDA (device query faked), persistent
workers for training and evaluation, and batches copied to the GPU without blocking."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
import torch
from torch import Tensor

from ranklit.losses import ROADMAPLoss
from ranklit.models import EmbeddingNet, RetrievalModule
from tests.tiny import tiny_datamodule


def _attach(datamodule: Any, device: str) -> None:
    """What a Trainer on ``device`` exposes to its datamodule: ``trainer.strategy.root_device``."""
    datamodule.trainer = SimpleNamespace(strategy=SimpleNamespace(root_device=torch.device(device)))


@pytest.mark.parametrize(("device", "pin_memory", "expected"), [
    ("cuda", None, True), ("cpu", None, False), (None, None, False), ("cuda", False, False), ("cpu", True, True),
])
def test_memory_is_pinned_when_the_trainer_runs_on_cuda_unless_told(device, pin_memory, expected) -> None:
    datamodule = tiny_datamodule(pin_memory=pin_memory)
    if device is not None:
        _attach(datamodule, device)
    loaders = [datamodule.train_dataloader(), datamodule.val_dataloader(), datamodule.test_dataloader()]
    assert [loader.pin_memory for loader in loaders] == [expected] * 3


@pytest.mark.parametrize("workers", [0, 2])
def test_workers_persist_across_epochs_and_validations(workers: int) -> None:
    datamodule = tiny_datamodule(num_workers=workers)
    loaders = [datamodule.train_dataloader(), datamodule.val_dataloader(), datamodule.predict_dataloader()]
    assert [(loader.num_workers, loader.persistent_workers) for loader in loaders] == [(workers, workers > 0)] * 3


class _CopyProbe(Tensor):
    """A tensor that records the keyword arguments of its ``.to`` calls and stays where it is (no GPU needed)."""

    calls: ClassVar[list[dict[str, Any]]] = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if getattr(func, "__name__", "") == "to":
            cls.calls.append({"device": args[1], **(kwargs or {})})
            return args[0]
        return super().__torch_function__(func, types, args, kwargs)


def test_batches_are_copied_to_a_cuda_device_without_blocking() -> None:
    module = RetrievalModule(EmbeddingNet("test_resnet", embedding_dim=8), ROADMAPLoss())
    batch = {"image": torch.zeros(2, 3, 4, 4), "label": torch.zeros(2, dtype=torch.long)}
    batch = {key: value.as_subclass(_CopyProbe) for key, value in batch.items()}
    _CopyProbe.calls.clear()
    module.transfer_batch_to_device(batch, torch.device("cuda", 0), 0)
    assert _CopyProbe.calls == [{"device": torch.device("cuda", 0), "non_blocking": True}] * 2


def test_every_config_header_gives_the_workers_per_gpu_rule() -> None:
    configs = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))
    assert len(configs) > 10
    for config in configs:
        header = "".join(line for line in config.read_text().splitlines(keepends=True) if line.startswith("#"))
        assert "data.num_workers is per process and DDP runs one process per GPU" in header, config.name
