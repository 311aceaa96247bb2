"""A JPEG that ranklit's transforms take at full size is decoded by torchvision into a tensor: the pixels Pillow
decodes (every chroma layout, progressive, grayscale, the 8 EXIF orientations); anything else, or a decoder that
disagrees, goes to Pillow with the same output; the steps after the crop run as the v2 modules do."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.transforms import v2

from ranklit.data.images import _tensor_jpeg, decoding
from ranklit.data.images._after_crop import kernels
from ranklit.data.images._crop_first import REDUCE_FROM, crop_first
from ranklit.data.images.decoding import load_image
from ranklit.data.images.transforms import test_transform, train_transform
from tests.data.test_decoding import _photo


def _save(path: Path, pixels: np.ndarray, mode: str = "RGB", **options) -> Path:
    Image.fromarray(pixels).convert(mode).save(path, "JPEG", quality=90, **options)
    return path


@pytest.fixture
def routes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Which decoder each call of decoding.decode_rgb ended with: "tensor" or "pillow" (it answered None)."""
    seen: list[str] = []

    def spy(path, orientation=1):
        out = decode(path, orientation)
        seen.append("pillow" if out is None else "tensor")
        return out

    decode = decoding.decode_rgb
    monkeypatch.setattr(decoding, "decode_rgb", spy)
    return seen


def _pillow_pixels(path: Path) -> torch.Tensor:
    return torch.from_numpy(np.asarray(load_image(path)).copy()).permute(2, 0, 1)


@pytest.mark.parametrize(
    ("mode", "options"),
    [("RGB", {}), ("RGB", {"subsampling": 0}), ("RGB", {"subsampling": 1}), ("RGB", {"progressive": True}), ("L", {})],
    ids=["420", "444", "422", "progressive", "gray"],
)
def test_torchvision_decodes_the_pixels_pillow_decodes(tmp_path: Path, routes, mode, options) -> None:
    path = _save(tmp_path / "a.jpg", _photo(301, 203), mode, **options)
    image, factor = decoding._decode(path, lambda width, height: 1, tensor=True)
    assert routes == ["tensor"] and factor == 1 and isinstance(image, torch.Tensor)
    assert image.dtype == torch.uint8 and torch.equal(image, _pillow_pixels(path))


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_is_applied_as_pillow_applies_it(tmp_path: Path, routes, orientation: int) -> None:
    """A 2 x 3 grid of flat colours, far apart: a wrong flip or transpose moves whole blocks."""
    blocks = np.array([[[255, 0, 0], [0, 255, 0], [0, 0, 255]], [[255, 255, 0], [0, 255, 255], [40, 40, 40]]])
    pixels = np.kron(blocks, np.ones((32, 32, 1))).astype(np.uint8)  # 64 x 96, 32-pixel blocks
    exif = Image.Exif()
    exif[0x0112] = orientation
    path = _save(tmp_path / "o.jpg", pixels, exif=exif)
    shapes = []
    image, _ = decoding._decode(path, lambda width, height: shapes.append((width, height)) or 1, tensor=True)
    assert routes == ["tensor"] and torch.equal(image, _pillow_pixels(path))
    assert shapes == [(64, 96) if orientation >= 5 else (96, 64)] and image.shape[1:] == shapes[0][::-1]


def test_cmyk_and_truncated_jpegs_go_to_pillow(tmp_path: Path, routes) -> None:
    cmyk = _save(tmp_path / "cmyk.jpg", _photo(64, 48), "CMYK")
    image, _ = decoding._decode(cmyk, lambda width, height: 1, tensor=True)
    assert isinstance(image, Image.Image) and routes == []  # never asked: Pillow converts CMYK
    whole = _save(tmp_path / "whole.jpg", _photo(600, 450))
    (tmp_path / "cut.jpg").write_bytes(whole.read_bytes()[:4000])
    with pytest.raises(ValueError, match=r"Could not decode image .*cut\.jpg: image file is truncated"):
        crop_first(train_transform(224)).from_file(tmp_path / "cut.jpg")
    assert routes == ["pillow"]  # torchvision rejected it; Pillow's error, as decoding first gives


def test_a_decoder_that_disagrees_with_pillow_is_not_used(tmp_path: Path, monkeypatch, routes) -> None:
    """Another libjpeg build (e.g. one that upsamples chroma otherwise): the probe differs, Pillow decodes, and the
    output is unchanged."""
    path = _save(tmp_path / "a.jpg", _photo(400, 300))
    transform = crop_first(train_transform(224))
    torch.manual_seed(3)
    expected = transform.from_file(path)
    monkeypatch.setattr(_tensor_jpeg, "_pillow", lambda data: torch.zeros(3, 1, 1, dtype=torch.uint8))
    _tensor_jpeg._decoder.cache_clear()
    try:
        torch.manual_seed(3)
        assert torch.equal(transform.from_file(path), expected) and _tensor_jpeg._decoder() is None
    finally:
        _tensor_jpeg._decoder.cache_clear()
    assert routes == ["tensor", "pillow"]


def test_below_a_megapixel_no_reduction_and_the_output_is_decoding_firsts(tmp_path: Path, routes) -> None:
    """An 800 x 600 JPEG, whose large crops could be halved: decoded at full size by torchvision, every crop and flip
    bit-identical to decoding first, with the same number of random draws."""
    assert 800 * 600 < REDUCE_FROM <= 1024 * 1024
    path = _save(tmp_path / "a.jpg", _photo(800, 600))
    for transform in (train_transform(224), test_transform(256, 224), train_transform(96, scale=(0.9, 1.0))):
        for seed in range(4):
            torch.manual_seed(seed)
            expected = transform(load_image(path)), torch.rand(1)
            torch.manual_seed(seed)
            out = crop_first(transform).from_file(path), torch.rand(1)
            assert torch.equal(out[0], expected[0]) and torch.equal(out[1], expected[1]), (transform, seed)
    assert routes == ["tensor"] * 12


def test_steps_it_does_not_know_are_left_to_the_v2_modules(tmp_path: Path) -> None:
    """A colour jitter after the crop: the whole tail runs as v2.Compose (its draws included)."""
    train = train_transform(64)
    jittered = v2.Compose([*train.transforms[:3], v2.ColorJitter(0.4, 0.4), *train.transforms[3:]])
    assert isinstance(kernels(jittered.transforms[2:]), v2.Compose)
    path = _save(tmp_path / "a.jpg", _photo(200, 150))
    torch.manual_seed(0)
    expected = jittered(load_image(path))
    torch.manual_seed(0)
    assert torch.equal(crop_first(jittered).from_file(path), expected)
