"""The loader worker's half of decoding on the device: a JPEG's bytes and the crop drawn for it, not the crop.

With ``data.decode_on_device`` (:class:`ranklit.data.RetrievalDataModule`),
:meth:`ranklit.data.images._crop_first.CropFirst .from_file` reads the file, checks its header and draws the crop box
and the flip from the size the header gives, with the same random draws in the same order as the CPU path (torchvision's
``RandomResizedCrop.get_params``, then one ``torch.rand(1)`` for the flip), so a seeded item and a resumed run see the
same crop and flip. It hands over an :class:`EncodedImage` (the file's bytes and its :class:`Geometry`) instead of
decoding. :func:`collate` packs a batch's encoded images into one :class:`EncodedImages` (one byte buffer, the geometry
as tensors); the decode, crop, resize and flip then run on the device (:mod:`ranklit.data.images._device_decode`).

Only what the device decoder reads as the CPU path does is encoded: a JPEG (by its header, whatever the extension)
in RGB or grayscale, with an EXIF orientation of 1-8, whose data ends with the end-of-image marker (a truncated
file lacks it). Any other file (PNG, CMYK or 16-bit images, a truncated or unreadable file, one Pillow does not
open) takes the CPU path in the worker: the same pixels, the same one-line error naming the file, and the same
``data.on_bad_image: skip`` replacement. The batch then mixes decoded crops and encoded images.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from PIL import Image
from torch import Tensor
from torch.utils.data import default_collate
from torchvision.transforms import InterpolationMode

__all__ = ["EncodedImage", "EncodedImages", "Geometry", "collate", "read_encoded"]

_ORIENTATION = 0x0112  # the EXIF tag
_TRANSPOSING = (5, 6, 7, 8)  # orientations that swap width and height
_EOI = b"\xff\xd9"  # a JPEG's last marker


@dataclass(frozen=True)
class Geometry:
    """What the device does to a decoded image (EXIF ``orientation`` applied): crop ``box`` ``(left, top, right,
    bottom)`` in pixels of the image as displayed, resize it to ``size`` ``(height, width)`` (``interpolation``,
    antialiased), centre-crop it to ``centre`` ``(height, width)`` if given, flip it horizontally if ``flip``."""

    box: tuple[int, int, int, int]
    size: tuple[int, int]
    centre: tuple[int, int] | None
    flip: bool
    interpolation: InterpolationMode

    @property
    def shape(self) -> tuple[int, int, int]:
        """The output's shape ``[3, H, W]``."""
        return (3, *(self.centre or self.size))


@dataclass(frozen=True)
class EncodedImage:
    """One item's JPEG bytes (a ``uint8`` tensor), its file, its EXIF orientation and its :class:`Geometry`."""

    data: Tensor
    path: str
    orientation: int
    geometry: Geometry


def read_encoded(path: str | Path, draw: Callable[[int, int], Geometry]) -> EncodedImage | None:
    """The file at ``path`` as an :class:`EncodedImage`, its geometry ``draw(width, height)`` from the size as
    displayed; ``None`` (and no draw) where it must take the CPU path (module docstring).

    Cost: reading the file and its header (~25 µs more than the read), no pixel decoded.
    """
    try:
        data = Path(path).read_bytes()
        with Image.open(io.BytesIO(data)) as image:
            if image.format != "JPEG" or image.mode not in ("RGB", "L"):
                return None
            orientation = int(image.getexif().get(_ORIENTATION, 1))
            width, height = image.size[::-1] if orientation in _TRANSPOSING else image.size
    except (OSError, SyntaxError, ValueError, EOFError, Image.DecompressionBombError):  # the CPU path says why
        return None
    if orientation not in range(1, 9) or not data.rstrip(b"\0").endswith(_EOI):  # truncated: the CPU path's error
        return None
    encoded = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    return EncodedImage(encoded, str(path), orientation, draw(width, height))


class EncodedImages:
    """A batch's encoded images: ``positions`` in the batch, their bytes ``data[offsets[i]:offsets[i + 1]]``, files,
    orientations and geometries. A plain class, so that Lightning's transfer leaves it on the CPU (the decoders read
    the bytes there); :meth:`pin_memory` pins the bytes (the loader's pinning thread calls it)."""

    __slots__ = ("data", "geometries", "offsets", "orientations", "paths", "positions")

    def __init__(self, positions: list[int], data: Tensor, offsets: list[int], paths: list[str],
                 orientations: list[int], geometries: list[Geometry]) -> None:
        self.positions, self.data, self.offsets = positions, data, offsets
        self.paths, self.orientations, self.geometries = paths, orientations, geometries

    def __len__(self) -> int:
        return len(self.positions)

    def pieces(self) -> list[Tensor]:
        """Each image's bytes, a view of the buffer."""
        return [self.data[start:end] for start, end in zip(self.offsets, self.offsets[1:], strict=False)]

    def pin_memory(self) -> EncodedImages:
        return EncodedImages(self.positions, self.data.pin_memory(), self.offsets, self.paths, self.orientations,
                             self.geometries)


def collate(items: list[Any]) -> Any:
    """``default_collate``, where an ``"image"`` may be an :class:`EncodedImage`: the batch's ``image`` is then
    ``uint8`` ``[B, 3, H, W]`` with zeros in the encoded places and ``"encoded"`` their :class:`EncodedImages`.

    Example:
        >>> item = {"image": torch.ones(3, 2, 2, dtype=torch.uint8), "label": 0}
        >>> sorted(collate([item, item]))
        ['image', 'label']
    """
    encoded = [(i, item["image"]) for i, item in enumerate(items)
               if isinstance(item, dict) and isinstance(item.get("image"), EncodedImage)]
    if not encoded:
        return default_collate(items)
    blank = torch.zeros(encoded[0][1].geometry.shape, dtype=torch.uint8)
    batch = default_collate([{**item, "image": blank} if isinstance(item["image"], EncodedImage) else item
                             for item in items])
    offsets = [0]
    for _, image in encoded:
        offsets.append(offsets[-1] + image.data.numel())
    batch["encoded"] = EncodedImages(
        [i for i, _ in encoded], torch.cat([image.data for _, image in encoded]), offsets,
        [image.path for _, image in encoded], [image.orientation for _, image in encoded],
        [image.geometry for _, image in encoded],
    )
    return batch
