"""ranklit's evaluation preprocessing with numpy and Pillow only: what a server feeds an exported model.

``ranklit export`` copies this file beside the model as ``ranklit_preprocess.py``; with the card's
``preprocessing`` it gives, for any image file, the array ``ranklit index``/``test`` feed the network (the same
values: the tests compare the embeddings within 1e-4 on transparent, palette, 16-bit, grayscale and EXIF-rotated
images)::

    from ranklit_preprocess import preprocess
    x = preprocess("photo.jpg", card["preprocessing"])  # float32 [3, crop_size, crop_size]

The steps (:data:`RECIPE`, also written into the card):

1. **Decode** with Pillow, the first frame; apply the **EXIF orientation**.
2. **To 8-bit RGB** (:func:`to_rgb`, which ranklit's own decoding uses too): grayscale replicated; 16/32-bit integer
   grayscale ``round(v * 255 / 65535)``; float grayscale by ``[0, 1]`` when it lies there, else clipped to
   ``[0, 255]``; **transparency composited over white**, ``a · rgb + (1 − a) · 255`` (Pillow's ``alpha_composite``);
   other modes by Pillow's conversion.
3. **Resize** the shorter side to ``resize_size`` (the other to ``int(resize_size · long / short)``), antialiased
   bilinear on the 8-bit image, as torch computes it for ``uint8`` (torchvision's ``Resize(antialias=True)``):
   separable, width then height, each output pixel a triangle-filter average of ``support = max(scale, 1)``
   pixels around ``scale · (i + 0.5)``, the weights quantised to 16-bit integers, each pass rounded to 8 bits.
   Pillow's own ``resize`` quantises otherwise (up to one grey level apart).
4. **Centre-crop** ``crop_size`` (offsets ``round((size − crop_size) / 2)``).
5. **Scale and normalise**: ``(v / 255 − mean) / std`` per channel, float32, channels first.

This file imports nothing but numpy and Pillow (a test checks it), so it runs wherever the model is served.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageOps

__all__ = ["BACKGROUND", "RECIPE", "open_rgb", "preprocess", "resize_shorter", "to_rgb"]

BACKGROUND: tuple[int, int, int] = (255, 255, 255)
"""The colour transparent pixels are composited over."""

RECIPE: list[str] = [
    "decode with Pillow, first frame; apply the EXIF orientation",
    "to 8-bit RGB: grayscale replicated; 16/32-bit integer grayscale round(v * 255 / 65535); float grayscale by [0, 1] "
    "when it lies there, else clipped to [0, 255]; transparency composited over white: a * rgb + (1 - a) * 255",
    "resize the shorter side to resize_size (the other to int(resize_size * long / short)): antialiased bilinear on "
    "the 8-bit image as torch computes it for uint8 (16-bit integer weights, each pass rounded to 8 bits)",
    "centre-crop crop_size x crop_size (offsets round((size - crop_size) / 2))",
    "float32 (v / 255 - mean) / std per channel, channels first [3, crop_size, crop_size]",
]
"""The card's ``preprocessing.recipe``: the steps of :func:`preprocess`, in words."""

_TRANSPARENT = ("LA", "RGBA", "PA", "La", "RGBa")
_ORIENTATION = 0x0112  # the EXIF tag


def to_rgb(image: Image.Image) -> Image.Image:
    """An image of any Pillow mode as 8-bit RGB (module docstring, step 2); an RGB image itself, without a copy.

    Example:
        >>> to_rgb(Image.new("RGBA", (1, 1), (0, 0, 0, 0))).getpixel((0, 0))
        (255, 255, 255)
    """
    if image.mode in ("I", "F") or image.mode.startswith("I;16"):
        return Image.fromarray(_scaled_to_8_bits(np.asarray(image), image.mode), "L").convert("RGB")
    if image.mode in _TRANSPARENT or "transparency" in image.info:
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (*BACKGROUND, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image if image.mode == "RGB" else image.convert("RGB")


def _scaled_to_8_bits(values: np.ndarray, mode: str) -> np.ndarray:
    """16/32-bit integer grayscale by the 16-bit range, float by [0, 1] when it lies there (module docstring)."""
    values = np.nan_to_num(values.astype(np.float64))
    if mode != "F":
        values = values * (255.0 / 65535.0)
    elif values.size and values.min() >= 0.0 and values.max() <= 1.0:
        values = values * 255.0
    return np.clip(np.rint(values), 0, 255).astype(np.uint8)


def open_rgb(path: str | Path) -> Image.Image:
    """Decode ``path`` as 8-bit RGB: first frame, EXIF orientation, :func:`to_rgb` (steps 1-2)."""
    with Image.open(path) as image:
        image.seek(0)
        image.load()
        if image.getexif().get(_ORIENTATION, 1) != 1:
            image = ImageOps.exif_transpose(image)
        return to_rgb(image)


def _taps(in_size: int, out_size: int) -> tuple[np.ndarray, np.ndarray, int]:
    """First input pixel ``[out]``, integer weights ``[out, taps]`` and their precision (bits) of one axis."""
    scale = in_size / out_size
    support, step = (scale, 1.0 / scale) if scale >= 1.0 else (1.0, 1.0)
    centre = scale * (np.arange(out_size) + 0.5)
    first = np.maximum((centre - support + 0.5).astype(np.int64), 0)
    count = np.minimum((centre + support + 0.5).astype(np.int64), in_size) - first
    tap = np.arange(int(count.max()))
    weights = np.clip(1.0 - np.abs((tap[None, :] + first[:, None] - centre[:, None] + 0.5) * step), 0.0, None)
    weights[tap[None, :] >= count[:, None]] = 0.0
    weights /= weights.sum(axis=1, keepdims=True)
    precision = 0
    while precision < 22 and int(0.5 + weights.max() * (1 << (precision + 1))) < (1 << 15):
        precision += 1
    return first, np.trunc(0.5 + weights * (1 << precision)).astype(np.int64), precision


def _resample(pixels: np.ndarray, axis: int, size: int) -> np.ndarray:
    """One antialiased bilinear pass of ``uint8`` ``[H, W, C]`` along ``axis`` (0: height, 1: width) to ``size``."""
    if pixels.shape[axis] == size:
        return pixels
    first, weights, precision = _taps(pixels.shape[axis], size)
    shape = [1, 1, 1]
    shape[axis] = size
    total = np.full((*pixels.shape[:axis], size, *pixels.shape[axis + 1 :]), 1 << (precision - 1), dtype=np.int64)
    for tap in range(weights.shape[1]):
        rows = np.minimum(first + tap, pixels.shape[axis] - 1)
        total += np.take(pixels, rows, axis=axis).astype(np.int64) * weights[:, tap].reshape(shape)
    return np.clip(total >> precision, 0, 255).astype(np.uint8)


def resize_shorter(pixels: np.ndarray, size: int) -> np.ndarray:
    """Resize ``uint8`` ``[H, W, C]`` so its shorter side is ``size`` (step 3).

    Example:
        >>> resize_shorter(np.zeros((40, 60, 3), np.uint8), 20).shape
        (20, 30, 3)
    """
    height, width = pixels.shape[:2]
    short, long = (width, height) if width <= height else (height, width)
    other = int(size * long / short)
    new_height, new_width = (other, size) if width <= height else (size, other)
    return _resample(_resample(pixels, 1, new_width), 0, new_height)


def preprocess(image: str | Path | Image.Image, preprocessing: dict[str, Any]) -> np.ndarray:
    """The network's input for ``image`` (a file, or a Pillow image) under a card's ``preprocessing``.

    Returns:
        float32 ``[3, crop_size, crop_size]``; stack several along a new first axis for a batch.

    Raises:
        ValueError: an ``interpolation`` other than ``"bilinear"`` (the only one ranklit evaluates with).
    """
    if preprocessing.get("interpolation", "bilinear") != "bilinear":
        raise ValueError(f"interpolation {preprocessing['interpolation']!r}: this recipe implements 'bilinear' only.")
    rgb = to_rgb(image) if isinstance(image, Image.Image) else open_rgb(image)
    pixels = resize_shorter(np.asarray(rgb, dtype=np.uint8), int(preprocessing["resize_size"]))
    crop = int(preprocessing["crop_size"])
    top, left = round((pixels.shape[0] - crop) / 2), round((pixels.shape[1] - crop) / 2)
    pixels = pixels[top : top + crop, left : left + crop]
    mean = np.asarray(preprocessing["mean"], dtype=np.float32)
    std = np.asarray(preprocessing["std"], dtype=np.float32)
    values = (pixels.astype(np.float32) * np.float32(1 / 255) - mean) / std
    return np.ascontiguousarray(values.transpose(2, 0, 1), dtype=np.float32)
