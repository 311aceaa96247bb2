"""A JPEG file decoded by torchvision straight into a ``uint8`` tensor ``[3, H, W]``, where that gives Pillow's pixels.

:func:`decode_rgb` serves :class:`ranklit.data.images._crop_first.CropFirst` where it decodes a JPEG at full size: the
pixels are written once, into the tensor the transforms then crop and resample (Pillow decodes into its own image
memory, which ``ToImage`` then copies), so the crop is a slice and the resize torchvision's ``uint8`` kernel; decoding
an 800×600 JPEG costs ~1.75 ms against Pillow's ~1.85 ms, and the copy and conversion after it go (per-item figures in
``benchmarks/RESULTS.md``).

Same pixels: torchvision and Pillow both decode with libjpeg(-turbo) at its defaults (integer IDCT, smooth chroma
upsampling), so the output equals Pillow's decode of the same file bit for bit, which ``load_image`` (decoding first)
gives. Two builds need not agree (libjpeg 9 upsamples chroma otherwise), so the first call decodes probe JPEGs (4:2:0,
4:2:2 and 4:4:4 chroma, progressive, grayscale, odd sizes) both ways, once per process; where one differs, or where
torchvision has no JPEG decoder (its image decoding is deprecated from 0.29 on), :func:`decode_rgb` answers ``None``
and Pillow decodes, as it does for a file torchvision rejects (Pillow then names the problem).

EXIF orientation, read by Pillow from the header, is applied to the tensor as a view or a flip: the transposes of
``PIL.ImageOps.exif_transpose``.
"""

from __future__ import annotations

import functools
import io
import os
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import Tensor

__all__ = ["decode_rgb"]

_ORIENTED: dict[int, Callable[[Tensor], Tensor]] = {  # EXIF orientation -> the image as displayed ([C, H, W])
    1: lambda x: x,
    2: lambda x: x.flip(-1),
    3: lambda x: x.flip(-2, -1),
    4: lambda x: x.flip(-2),
    5: lambda x: x.transpose(-2, -1),
    6: lambda x: x.transpose(-2, -1).flip(-1),
    7: lambda x: x.transpose(-2, -1).flip(-2, -1),
    8: lambda x: x.transpose(-2, -1).flip(-2),
}


def decode_rgb(path: str | Path, orientation: int = 1) -> Tensor | None:
    """The JPEG at ``path`` as an RGB ``uint8`` tensor ``[3, H, W]`` (grayscale replicated), EXIF ``orientation``
    applied; ``None`` where torchvision cannot decode it as Pillow does (module docstring): decode it with Pillow.

    Cost: reading the file, and libjpeg-turbo's decode (~1.75 ms for 800×600 at quality 90); nothing after it (the
    tensor is a channels-last view of the decoded pixels; a crop of it is a view too).
    """
    decode = _decoder()
    if decode is None or orientation not in _ORIENTED:
        return None
    with open(path, "rb") as file:
        data = bytearray(os.fstat(file.fileno()).st_size)  # writable: torch.frombuffer warns about read-only bytes
        del data[file.readinto(data) :]  # in place (a file that shrank since)
    try:
        return _ORIENTED[orientation](decode(data))
    except (RuntimeError, ValueError):  # truncated, corrupt, empty: Pillow decodes it or raises load_image's error
        return None


@functools.cache
def _decoder() -> Callable[[bytearray], Tensor] | None:
    """torchvision's JPEG decoder to RGB, if it has one and it decodes the probes as Pillow does; else ``None``."""
    try:
        from torchvision.io import ImageReadMode, decode_jpeg
    except ImportError:  # a torchvision without image decoding
        return None

    def decode(data: bytearray) -> Tensor:
        with warnings.catch_warnings():  # torchvision >= 0.29 deprecates its decoders (the user did not call them)
            warnings.simplefilter("ignore", DeprecationWarning)
            image = decode_jpeg(torch.frombuffer(data, dtype=torch.uint8), mode=ImageReadMode.RGB)
        return image

    try:
        agrees = all(torch.equal(decode(bytearray(probe)), _pillow(probe)) for probe in _probes())
    except (RuntimeError, OSError):  # torchvision built without its image extension; Pillow without a JPEG encoder
        return None
    return decode if agrees else None


def _probes() -> list[bytes]:
    """Small JPEGs exercising every chroma layout, progressive coding and grayscale, with sizes not multiples of 16."""
    rows, columns = np.mgrid[0:37, 0:45]
    pixels = np.stack([rows * 7 % 256, columns * 5 % 256, (rows * columns) % 256], axis=-1).astype(np.uint8)
    pixels[10:20, 12:30] = (250, 10, 30)  # sharp colour edges: where chroma upsampling matters
    image = Image.fromarray(pixels)
    options: list[tuple[Image.Image, dict[str, object]]] = [
        (image, {"subsampling": subsampling}) for subsampling in (0, 1, 2)
    ]
    options += [(image, {"progressive": True}), (image.convert("L"), {})]
    probes = []
    for picture, settings in options:
        buffer = io.BytesIO()
        picture.save(buffer, "JPEG", quality=90, **settings)
        probes.append(buffer.getvalue())
    return probes


def _pillow(data: bytes) -> Tensor:
    with Image.open(io.BytesIO(data)) as image:
        return torch.from_numpy(np.asarray(image.convert("RGB")).copy()).permute(2, 0, 1)
