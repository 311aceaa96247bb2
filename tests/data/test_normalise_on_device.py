"""ranklit's loaders hand over ``uint8`` crops, scaled and normalised on the device by the datamodule's
``on_after_batch_transfer``: the batches a model sees equal those of the full transform in the loader, bit for bit."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import lightning as L
import pytest
import torch
from PIL import Image

from ranklit.data import ClassFolderDataset, PKSampler, RetrievalDataModule
from ranklit.data.images.transforms import train_transform
from tests.data.test_decoding import _photo

MEAN, STD = (0.4, 0.5, 0.6), (0.2, 0.25, 0.3)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("on_device")
    for c in range(3):
        (folder / f"c{c}").mkdir()
        for i in range(4):  # under and over the reduced-decoding threshold, JPEG and PNG
            width, height, suffix = ((800, 600, "jpg"), (1300, 900, "jpg"), (300, 200, "png"), (500, 400, "jpg"))[i]
            Image.fromarray(_photo(width, height)).save(folder / f"c{c}" / f"{i}.{suffix}", quality=90)
    return folder


def _module(root: Path, on_device: bool) -> RetrievalDataModule:
    return RetrievalDataModule(ClassFolderDataset(root), ClassFolderDataset(root),
                               batch_sampler=partial(PKSampler, p=2, k=2, seed=5), image_size=64, resize_size=72,
                               crop_size=64, eval_batch_size=5, mean=MEAN, std=STD,
                               normalize_on_device=on_device)


def test_uint8_batches_normalised_after_the_transfer_equal_the_loaders_float_batches(root: Path) -> None:
    on_device, in_loader = _module(root, True), _module(root, False)
    for kind in ("train_dataloader", "val_dataloader"):
        batches = zip(getattr(on_device, kind)(), getattr(in_loader, kind)(), strict=True)
        for number, (small, full) in enumerate(batches):
            assert small["image"].dtype == torch.uint8 and full["image"].dtype == torch.float32
            moved = on_device.on_after_batch_transfer(small, number)
            assert torch.equal(moved["image"], full["image"]), kind  # the same functions: bit for bit
            assert torch.equal(moved["index"], full["index"]) and torch.equal(moved["label"], full["label"])
            assert torch.equal(in_loader.on_after_batch_transfer(full, number)["image"], full["image"])


def test_a_datasets_own_transform_is_left_as_it_is(root: Path) -> None:
    own = ClassFolderDataset(root, transform=train_transform(32, mean=MEAN, std=STD))
    module = RetrievalDataModule(own, batch_sampler=partial(PKSampler, p=2, k=2, seed=5), image_size=64)
    batch = next(iter(module.train_dataloader()))
    assert batch["image"].dtype == torch.float32 and module.on_after_batch_transfer(batch, 0) == batch


class _Sees(L.LightningModule):
    """Records the dtype and range of the images its steps get."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.seen: list[tuple[torch.dtype, float]] = []

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        self.seen.append((batch["image"].dtype, float(batch["image"].min())))
        return self.layer(batch["image"].mean().view(1, 1)).sum()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.0)


def test_a_trainer_hands_the_model_normalised_floats(root: Path) -> None:
    model = _Sees()
    quiet = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer = L.Trainer(accelerator="cpu", max_steps=2, use_distributed_sampler=False, **quiet)
    trainer.fit(model, datamodule=_module(root, True))
    assert [dtype for dtype, _ in model.seen] == [torch.float32] * 2
    assert min(low for _, low in model.seen) < 0  # normalised: below zero, not in [0, 255]


class _Augments(_Sees):
    """A module with its own ``on_after_batch_transfer`` (GPU augmentations): it still runs, on normalised images."""

    def __init__(self) -> None:
        super().__init__()
        self.given: list[torch.dtype] = []

    def on_after_batch_transfer(self, batch: dict, dataloader_idx: int) -> dict:
        self.given.append(batch["image"].dtype)
        return {**batch, "image": batch["image"] + 100.0}


def test_a_modules_own_hook_still_runs_after_the_normalisation(root: Path) -> None:
    model = _Augments()
    quiet = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer = L.Trainer(accelerator="cpu", max_steps=2, use_distributed_sampler=False, **quiet)
    with pytest.warns(UserWarning, match="overridden `on_after_batch_transfer` in both"):  # Lightning's own notice
        trainer.fit(model, datamodule=_module(root, True))
    assert model.given == [torch.float32] * 2  # normalised before the module's hook, as without on-device scaling
    assert min(low for _, low in model.seen) > 90  # the module's hook ran: its +100 reached the steps
