"""ranklit's transforms take the file: the crop is drawn from the header, the JPEG decoded at the reduction that crop
allows; the same draws as decoding first, bit-identical without reduction, within tolerance with it."""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from ranklit.data import ClassFolderDataset, PKSampler, RetrievalDataModule, SeededIndex
from ranklit.data.images import _crop_first
from ranklit.data.images._crop_first import crop_first
from ranklit.data.images.decoding import load_image
from ranklit.data.images.transforms import test_transform, train_transform
from tests.data.test_decoding import _photo

UNIT = {"mean": (0.0, 0.0, 0.0), "std": (1.0, 1.0, 1.0)}  # outputs in [0, 1]: differences read in 1/255 below
TRAIN, TEST = train_transform(224, **UNIT), test_transform(256, 224, **UNIT)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("crop_first")
    paths = {
        "big": (1600, 1200, "jpg"),  # crops of 224 from 1/1 to 1/4, evaluation at 1/4
        "odd": (1203, 1001, "jpg"),  # sizes not divisible by the reduction
        "small": (400, 300, "jpg"),  # no reduction possible
        "png": (1200, 900, "png"),  # not a JPEG: never reduced
    }
    for name, (width, height, suffix) in paths.items():
        Image.fromarray(_photo(width, height)).save(root / f"{name}.{suffix}", quality=90)
    exif = Image.Exif()
    exif[0x0112] = 6  # stored 1600 x 1000, displayed 1000 x 1600
    Image.fromarray(_photo(1600, 1000)).save(root / "rotated.jpg", quality=90, exif=exif)
    return {path.stem: path for path in root.iterdir()}


def _decode_first(transform, path: Path, seed: int) -> tuple[torch.Tensor, float]:
    torch.manual_seed(seed)
    out = transform(load_image(path))
    return out, torch.rand(1).item()  # the next draw: the same number of draws were made


def _from_file(transform, path: Path, seed: int) -> tuple[torch.Tensor, float]:
    torch.manual_seed(seed)
    out = crop_first(transform).from_file(path)
    return out, torch.rand(1).item()


@pytest.fixture
def reductions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The reduction each decode of ranklit.data.images._crop_first used."""
    seen: list[int] = []

    def spy(path, reduction, **options):
        image, factor = decode(path, reduction, **options)
        seen.append(factor)
        return image, factor

    decode = _crop_first._decode
    monkeypatch.setattr(_crop_first, "_decode", spy)
    return seen


@pytest.mark.parametrize("name", ["small", "png"])
@pytest.mark.parametrize("transform", [TRAIN, TEST], ids=["train", "test"])
def test_without_reduction_the_output_and_the_draws_are_bit_identical(files, reductions, name, transform) -> None:
    for seed in range(6):
        (old, old_next), (new, new_next) = (f(transform, files[name], seed) for f in (_decode_first, _from_file))
        assert torch.equal(old, new) and old_next == new_next, seed
    assert set(reductions) == {1}


def _psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    mse = (a - b).pow(2).mean().item()
    return math.inf if mse == 0 else 10 * math.log10(1 / mse)


@pytest.mark.parametrize("name", ["big", "odd", "rotated"])
def test_reduced_training_crops_are_the_same_crops_and_flips_within_tolerance(files, reductions, name) -> None:
    """Same seed: the crop box and the flip drawn from the header equal those drawn on the decoded image (a wrong
    box, orientation or flip differs by tens of 1/255), the pixels differ by the DCT scaling and the resampling."""
    differences, psnrs = [], []
    for seed in range(16):
        (old, old_next), (new, new_next) = (f(TRAIN, files[name], seed) for f in (_decode_first, _from_file))
        assert old.shape == new.shape == (3, 224, 224) and old_next == new_next
        differences.append(255 * (old - new).abs().mean().item())
        psnrs.append(_psnr(old, new))
    assert max(differences) < 1.5 and min(psnrs) > 40, (max(differences), min(psnrs))  # measured: < 0.7, > 48 dB
    assert 2 in reductions and (name != "big" or 4 in reductions), reductions
    assert sum(d == 0 for d in differences) == reductions.count(1)  # bit-identical exactly where not reduced


@pytest.mark.parametrize("name", ["big", "odd", "rotated"])
def test_reduced_evaluation_resize_within_tolerance(files, reductions, name) -> None:
    (old, _), (new, _) = (f(TEST, files[name], 0) for f in (_decode_first, _from_file))
    assert old.shape == new.shape == (3, 224, 224)
    difference = 255 * (old - new).abs().mean().item()
    assert difference < 1.5 and _psnr(old, new) > 40, (difference, _psnr(old, new))  # measured: < 0.7, > 48 dB
    assert reductions == [{"big": 4, "odd": 2, "rotated": 2}[name]]


def test_the_datamodule_reads_files_crop_first_and_substitutes_an_undecodable_one(tmp_path: Path, files) -> None:
    """Through RetrievalDataModule: a seeded item equals decoding first then transforming under its seed, and a
    truncated JPEG (its header reads, its pixels do not) is replaced by the next image of its class under
    `on_bad_image: skip`, with that item's seed."""
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        Image.fromarray(_photo(600, 450)).save(tmp_path / name / "1.jpg", quality=90)
    (tmp_path / "a" / "0.jpg").write_bytes(files["big"].read_bytes()[:20000])
    dataset = ClassFolderDataset(tmp_path)
    module = RetrievalDataModule(dataset, batch_sampler=partial(PKSampler, p=2, k=2), on_bad_image="skip")
    assert isinstance(dataset.transform, _crop_first.CropFirst)
    index = SeededIndex(2, 1234)
    item = dataset[index]
    torch.manual_seed(1234)
    assert torch.equal(item["image"], dataset.transform(load_image(dataset.paths[2])))
    with pytest.warns(UserWarning, match=r"skipped \(`on_bad_image: skip`\).*0\.jpg"):
        substituted = dataset[SeededIndex(0, 1234)]
    torch.manual_seed(1234)
    assert torch.equal(substituted["image"], dataset.transform(load_image(dataset.paths[1])))
    assert substituted["index"] == 0 and module.train_dataset is dataset
    dataset.on_bad_image = "stop"
    with pytest.raises(ValueError, match=r"Could not decode image .*0\.jpg"):
        dataset[SeededIndex(0, 1234)]


def test_a_transform_of_ones_own_is_kept_and_decodes_first(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8)).save(tmp_path / "a" / "0.jpg")
    own = train_transform(8)
    dataset = ClassFolderDataset(tmp_path, transform=own)
    RetrievalDataModule(dataset, batch_sampler=partial(PKSampler, p=1, k=1))
    assert dataset.transform is own and crop_first(torch.nn.Identity()).__class__ is torch.nn.Identity
