"""FaultTolerance: non-finite tensors stop training with their name and step and are never checkpointed; an
interruption or a corrupt image saves a resumable checkpoint first."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from ranklit.callbacks import FaultTolerance
from ranklit.callbacks._faults import first_non_finite
from ranklit.data.datasets.base import load_image


class _Model(L.LightningModule):
    """A linear layer and a batch-norm; Adam at ``lr``."""

    def __init__(self, lr: float = 1e-3) -> None:
        super().__init__()
        self.layers, self.lr = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)), lr

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        return self.layers(batch).pow(2).sum()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.lr)


class _Images(Dataset):
    """Random rows; item ``bad`` reads a corrupt image file."""

    def __init__(self, bad: Path | None = None) -> None:
        self.bad = bad

    def __len__(self) -> int:
        return 16

    def __getitem__(self, index: int) -> torch.Tensor:
        if self.bad is not None and index == 6:
            load_image(self.bad)
        return torch.randn(4)


def _fit(tmp_path: Path, model: L.LightningModule, data: Dataset, **options) -> L.Trainer:
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=tmp_path,
                        callbacks=[FaultTolerance(tmp_path)], **options)
    trainer.fit(model, DataLoader(data, batch_size=2))
    return trainer


def test_huge_learning_rate_stops_naming_the_tensor_and_step(tmp_path: Path) -> None:
    with pytest.raises(FloatingPointError, match=r"Non-finite .* `layers\.\S+` at global step \d+"):
        _fit(tmp_path, _Model(lr=1e30), _Images())
    assert not list(tmp_path.rglob("*.ckpt"))  # neither the exception checkpoint nor ModelCheckpoint's


def test_non_finite_batchnorm_buffer_is_named(tmp_path: Path) -> None:
    model = _Model()
    model.layers[1].running_var.fill_(float("inf"))
    with pytest.raises(
        FloatingPointError,
        match=r"parameter or buffer `layers\.1\.running_var` at global step 1",
    ):
        _fit(tmp_path, model, _Images())


def test_no_checkpoint_with_non_finite_weights_is_written(tmp_path: Path) -> None:
    trainer = _fit(tmp_path, _Model(), _Images(), max_steps=1)
    trainer.lightning_module.layers[0].weight.data[0, 0] = float("nan")
    with pytest.raises(FloatingPointError, match=r"`layers\.0\.weight`"):
        trainer.save_checkpoint(tmp_path / "manual.ckpt")
    assert not (tmp_path / "manual.ckpt").exists()


def test_corrupt_image_saves_a_resumable_checkpoint_then_names_the_file(
    tmp_path: Path,
) -> None:
    bad = tmp_path / "broken.jpg"
    bad.write_bytes(b"not a jpeg")
    with pytest.raises(ValueError, match=r"Could not decode image .*broken\.jpg"):
        _fit(tmp_path, _Model(), _Images(bad))
    checkpoint = torch.load(tmp_path / "interrupted.ckpt", weights_only=True)
    assert checkpoint["global_step"] == 3  # batches 0-2 trained; the one holding item 6 failed


def test_first_non_finite_and_argument_check() -> None:
    assert first_non_finite([("a", torch.ones(2)), ("b", None), ("c", torch.arange(3))]) is None
    assert first_non_finite([("a", torch.tensor([float("nan")]))]) == "a"
    with pytest.raises(ValueError, match="`check_every_n_steps` must be a positive integer"):
        FaultTolerance(".", check_every_n_steps=0)
