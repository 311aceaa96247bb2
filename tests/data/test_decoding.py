"""Every image mode Pillow opens is decoded to the RGB pixels a user expects (ranklit.data.images.decoding)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.transforms.v2 import functional as F

from ranklit.data.images.decoding import load_image, relevant_side

RAMP = np.tile(np.arange(0, 256, 4, dtype=np.uint8), (8, 1))  # 8 x 64, values 0, 4, ..., 252


def _rgb(path: Path, **kwargs) -> np.ndarray:
    return np.asarray(load_image(path, **kwargs), dtype=np.int64)


def test_8_bit_grayscale_is_replicated_to_three_channels(tmp_path: Path) -> None:
    Image.fromarray(RAMP, "L").save(tmp_path / "l.png")
    out = _rgb(tmp_path / "l.png")
    assert out.shape == (8, 64, 3) and (out == RAMP[..., None]).all()


@pytest.mark.parametrize("suffix", [".png", ".tif"])
def test_16_bit_grayscale_is_scaled_by_its_range(tmp_path: Path, suffix: str) -> None:
    values = RAMP.astype(np.uint16) * 257  # 8-bit v as 16-bit v * 257: decodes back to v exactly
    Image.fromarray(values).save(tmp_path / f"g16{suffix}")
    assert Image.open(tmp_path / f"g16{suffix}").mode.startswith("I")
    out = _rgb(tmp_path / f"g16{suffix}")
    assert (out == RAMP[..., None]).all(), np.unique(out)  # Pillow's convert("RGB") gives 0 or 255 only


def test_float_grayscale_in_unit_range_is_scaled(tmp_path: Path) -> None:
    Image.fromarray(RAMP.astype(np.float32) / 255.0, "F").save(tmp_path / "f.tif")
    assert (np.abs(_rgb(tmp_path / "f.tif") - RAMP[..., None]) <= 1).all()


@pytest.mark.parametrize("mode", ["RGBA", "LA"])
def test_transparency_is_composited_over_white(tmp_path: Path, mode: str) -> None:
    """A black drawing whose shape is in the alpha channel: black where opaque, white where transparent, the ramp
    of alphas in between (a = v / 255: out = 255 (1 - a))."""
    black = np.zeros((8, 64, 3 if mode == "RGBA" else 1), dtype=np.uint8)
    Image.fromarray(np.concatenate([black, RAMP[..., None]], axis=2).squeeze(), mode).save(tmp_path / "a.png")
    out = _rgb(tmp_path / "a.png")
    assert (np.abs(out - (255 - RAMP[..., None])) <= 1).all()


def test_palette_with_and_without_a_transparent_colour(tmp_path: Path) -> None:
    palette = Image.fromarray(np.array([[0, 1], [2, 1]], dtype=np.uint8), "P")
    palette.putpalette([255, 0, 0, 0, 255, 0, 0, 0, 255] + [0] * 759)
    palette.save(tmp_path / "p.png")
    assert _rgb(tmp_path / "p.png")[1, 0].tolist() == [0, 0, 255]
    palette.save(tmp_path / "t.png", transparency=1)  # colour 1 (green) is transparent: white
    out = _rgb(tmp_path / "t.png")
    assert out[0, 0].tolist() == [255, 0, 0] and out[0, 1].tolist() == [255, 255, 255]


def test_exif_orientation_is_applied(tmp_path: Path) -> None:
    pixels = np.zeros((20, 40, 3), dtype=np.uint8)
    pixels[:, :20] = 255  # left half white, stored landscape
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 degrees clockwise to display"
    Image.fromarray(pixels).save(tmp_path / "o.jpg", exif=exif, quality=95)
    out = _rgb(tmp_path / "o.jpg")
    assert out.shape == (40, 20, 3)  # displayed portrait
    assert out[:15].mean() > 200 and out[25:].mean() < 50  # the white half is now on top


def test_animated_gif_gives_its_first_frame(tmp_path: Path) -> None:
    frames = [Image.new("RGB", (8, 8), colour) for colour in ((255, 0, 0), (0, 0, 255))]
    frames[0].save(tmp_path / "a.gif", save_all=True, append_images=frames[1:], duration=100)
    assert Image.open(tmp_path / "a.gif").n_frames == 2
    out = _rgb(tmp_path / "a.gif")
    assert (np.abs(out - [255, 0, 0]) <= 8).all()


def test_cmyk_jpeg(tmp_path: Path) -> None:
    Image.new("CMYK", (8, 8), (0, 255, 255, 0)).save(tmp_path / "c.jpg", quality=95)  # pure red in CMYK
    out = _rgb(tmp_path / "c.jpg")
    assert (np.abs(out - [255, 0, 0]) <= 12).all(), out[0, 0]


def test_truncated_and_empty_files_name_the_path(tmp_path: Path) -> None:
    Image.new("RGB", (64, 64), (9, 9, 9)).save(tmp_path / "x.jpg")
    (tmp_path / "cut.jpg").write_bytes((tmp_path / "x.jpg").read_bytes()[:200])
    (tmp_path / "empty.png").write_bytes(b"")
    for name in ("cut.jpg", "empty.png"):
        with pytest.raises(ValueError, match=f"Could not decode image {tmp_path / name}"):
            load_image(tmp_path / name)


def _photo(width: int, height: int) -> np.ndarray:
    """A smooth random colour field with mild noise, roughly as compressible as a photograph."""
    rng = np.random.default_rng(0)
    coarse = rng.uniform(0, 255, size=(height // 40 + 2, width // 40 + 2, 3)).astype(np.uint8)
    field = np.asarray(Image.fromarray(coarse).resize((width, height), Image.BICUBIC), dtype=np.int16)
    return np.clip(field + rng.integers(-8, 9, size=field.shape), 0, 255).astype(np.uint8)


def test_reduced_size_decoding_keeps_every_crop_at_least_the_output_size_and_the_crop_within_tolerance(
    tmp_path: Path,
) -> None:
    """A 1600 x 1200 JPEG for crops of 224 covering >= 16 % (ratio >= 3/4): the shortest crop is 480 px, so 1/2
    (240 px >= 224) is allowed and 1/4 is not; the same crop box (in relative coordinates) of the full and of the
    reduced decode, resized to 224, differs by under 1.5 / 255 on average (the tolerance of
    ranklit.data.images.decoding)."""
    Image.fromarray(_photo(1600, 1200)).save(tmp_path / "big.jpg", quality=90)
    area = 0.16 * 3 / 4
    assert relevant_side(1600, 1200, area) == pytest.approx(480.0)
    reduced = load_image(tmp_path / "big.jpg", min_side=224, area_fraction=area)
    assert reduced.size == (800, 600)
    assert load_image(tmp_path / "big.jpg", min_side=500, area_fraction=area).size == (1600, 1200)
    full, half = (
        torch.from_numpy(np.array(image)).permute(2, 0, 1) for image in (load_image(tmp_path / "big.jpg"), reduced)
    )
    differences = []
    for top, left, height, width in [(0.0, 0.0, 1.0, 1.0), (0.1, 0.3, 0.4, 0.4), (0.5, 0.2, 0.4, 0.3)]:
        crops = [
            F.resized_crop(
                image, round(top * h), round(left * w), round(height * h), round(width * w), [224, 224], antialias=True
            ).float()
            for image, h, w in ((full, 1200, 1600), (half, 600, 800))
        ]
        differences.append((crops[0] - crops[1]).abs().mean().item())
    assert max(differences) < 1.5, differences  # measured: 0.24 to 0.63


def test_reduced_size_decoding_applies_to_odd_sizes(tmp_path: Path) -> None:
    """1601 x 1201 at 1/2 is 801 x 601 (Pillow picks the reduction from the size asked: asking ceil(1601 / 2) = 801
    gave 1601 // 801 = 1, no reduction, before issue 31)."""
    Image.fromarray(np.zeros((1201, 1601, 3), dtype=np.uint8)).save(tmp_path / "odd.jpg")
    assert load_image(tmp_path / "odd.jpg", min_side=224, area_fraction=0.16 * 3 / 4).size == (801, 601)
