"""Training from JPEG files with ``data.decode_on_device: true`` on the CPU (the device path on CPU tensors): the same
weights as the workers' decoding, and a run interrupted and resumed equals the uninterrupted one."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import lightning as L
import pytest
import torch
from PIL import Image

from ranklit.callbacks import FaultTolerance, ResumableTraining
from ranklit.data import ClassFolderDataset, PKSampler, RetrievalDataModule
from ranklit.losses import ROADMAPLoss
from ranklit.models import EmbeddingNet, RetrievalModule
from tests.callbacks.test_resume_e2e import _state, _Stop
from tests.data.test_decoding import _photo

EPOCHS, BATCHES = 2, 3


def jpeg_classes(folder: Path) -> Path:
    """4 classes of 4 JPEGs of about 60 x 45 (one EXIF-rotated, one PNG), for 32-px crops."""
    exif = Image.Exif()
    exif[0x0112] = 6
    for c in range(4):
        (folder / f"c{c}").mkdir()
        for i in range(4):
            image = Image.fromarray(_photo(56 + 3 * i + c, 45))
            if (c, i) == (1, 2):
                image.save(folder / f"c{c}" / f"{i}.png")
            else:
                image.save(folder / f"c{c}" / f"{i}.jpg", quality=90, exif=exif if (c, i) == (2, 1) else b"")
    return folder


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return jpeg_classes(tmp_path_factory.mktemp("jpegs"))


def fit(root: Path, folder: Path, on_device: bool, stop: _Stop, ckpt_path: str | None, seed: int,
        accelerator: str = "cpu") -> L.Trainer:
    """Two epochs of 3 batches of 2 x 2 from the folder ``root``, resumable (also ``tests/test_gpu.py``'s)."""
    L.seed_everything(seed)
    datamodule = RetrievalDataModule(
        ClassFolderDataset(root), ClassFolderDataset(root), image_size=32, resize_size=36, crop_size=32,
        batch_sampler=partial(PKSampler, p=2, k=2, seed=3, batches_per_epoch=BATCHES), decode_on_device=on_device,
    )
    model = RetrievalModule(EmbeddingNet("test_resnet", embedding_dim=8, pretrained=False), ROADMAPLoss())
    trainer = L.Trainer(
        max_epochs=EPOCHS, accelerator=accelerator, devices=1, deterministic=True, logger=False,
        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0, use_distributed_sampler=False,
        default_root_dir=folder, callbacks=[ResumableTraining(), FaultTolerance(folder), stop],
    )
    trainer.fit(model, datamodule=datamodule, ckpt_path=ckpt_path)
    assert datamodule.train_dataset.transform.encode is on_device
    return trainer


def assert_same(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert actual.keys() == expected.keys()
    for key, value in expected.items():
        torch.testing.assert_close(actual[key], value, rtol=0, atol=1e-6, msg=key)


@pytest.mark.slow
def test_decoding_on_the_device_trains_the_same_weights_and_resumes_exactly(root: Path, tmp_path: Path) -> None:
    seen: list[list[int]] = []
    workers = _state(fit(root, tmp_path / "workers", False, _Stop(None, "", seen), None, seed=0))
    reference_batches, seen = list(seen), []
    device = _state(fit(root, tmp_path / "device", True, _Stop(None, "", seen), None, seed=0))
    assert seen == reference_batches
    assert_same(device, workers)  # the images are bit-identical below a megapixel: so are the weights
    seen = []
    with pytest.raises(SystemExit):
        fit(root, tmp_path / "run", True, _Stop(4, "sigterm", seen), None, seed=0)
    resumed = fit(root, tmp_path / "run", True, _Stop(None, "", seen), str(tmp_path / "run" / "interrupted.ckpt"),
                   seed=100)  # another global seed: restored
    assert resumed.global_step == EPOCHS * BATCHES and seen == reference_batches
    assert_same(_state(resumed), workers)
