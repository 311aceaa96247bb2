"""ranklit's training and evaluation transforms taking the image *file*: the crop is chosen from the header's size, then
the JPEG is decoded at the size that crop needs.

With :func:`ranklit.data.images.transforms.train_transform` the crop box ``(top, left, h, w)`` is drawn on the full
size, with the same random draws in the same order as the transform draws on a decoded image (torchvision's
``RandomResizedCrop.get_params``; then the flip), so a seeded item, and a resumed run, sees the same crop and flip.
Then, by the image's size (the per-item CPU times behind :data:`REDUCE_FROM` are in ``benchmarks/RESULTS.md``):

- **from 1 megapixel on** the JPEG is decoded at the largest reduction ``r`` (1/2, 1/4, 1/8 in the DCT domain,
  Pillow's ``draft``: cheaper to decode, and a smaller image to resample) with ``h / r >= size`` and ``w / r >=
  size`` (:func:`ranklit.data.images.decoding._largest_reduction`), and the box, divided by ``r`` (fractional: the
  reduced pixel ``x`` covers the full image's ``[r x, r x + r)``), is resampled to the output size by Pillow
  (antialiased, as torchvision's). The output differs from full decoding by the DCT scaling and the resampling: mean
  absolute difference under 1.5 of 255 on a photograph-like image (measured 0.3-0.7), PSNR over 40 dB (measured 48-53),
  tested in ``tests/data/test_crop_first.py``.
- **below it, or where** ``r = 1`` (small crops, other formats), the file is decoded at full size and the output is
  **bit-identical** to decoding first: an RGB or grayscale JPEG by torchvision into a ``uint8`` tensor
  (:mod:`ranklit.data.images._tensor_jpeg`: Pillow's pixels, checked on probe JPEGs once per process), whose crop is a
  view resized by torchvision's ``uint8`` kernel, as ``RandomResizedCrop`` resizes; any other file by Pillow, the
  training crop cut before the conversion to a tensor. At 800×600 a reduced decode cost more than this full-size route.

With :func:`ranklit.data.images.transforms.test_transform` (resize the shorter side to ``resize_size``, centre crop) the
whole image takes the same routes: resampled to the size the resize gives the full image, then centre-cropped. The
steps after the crop (flip, scaling, normalisation) run as direct calls of torchvision's functional API
(:mod:`ranklit.data.images._after_crop`). Cost: one header read (~25 µs) more than decoding first.

With ``on_device=True`` (what :class:`ranklit.data.RetrievalDataModule` sets by default) the transform stops before
its scaling and normalisation and returns the ``uint8`` crop: a quarter of the bytes to collate in the loader worker,
to hand to the main process and to copy to the GPU; :func:`normalise_on_device` then scales and normalises the batch
with the same torchvision functions, on the device (``RetrievalDataModule.on_after_batch_transfer``), so the values
are those of the full transform.

With ``encode`` set (``data.decode_on_device``: :class:`ranklit.data.RetrievalDataModule` sets it on a transform with
``on_device``), :meth:`CropFirst.from_file` draws the same box and flip from the header and hands over the JPEG's
bytes with them instead of decoding (:mod:`ranklit.data.images._encoded`); the device decodes, crops, resizes and flips
(:mod:`ranklit.data.images._device_decode`). A file the device decoder does not take is decoded here as above.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from PIL import Image
from torch import Tensor, nn
from torchvision import tv_tensors
from torchvision.transforms import InterpolationMode, RandomResizedCrop, v2
from torchvision.transforms.v2 import functional as F

from ranklit.data.images._after_crop import kernels
from ranklit.data.images._encoded import EncodedImage, Geometry, read_encoded
from ranklit.data.images.decoding import _decode, _largest_reduction

__all__ = ["CropFirst", "crop_first", "normalise_on_device"]

REDUCE_FROM = 1_000_000
"""Images of fewer pixels are decoded at full size: there a reduced decode costs as much as torchvision's full-size
decode and crop (800×600: 5 % more; 1024×768: the same; 1280×960: 5 % less; ``benchmarks/RESULTS.md``)."""
_PIL_FILTERS = {
    InterpolationMode.BILINEAR: Image.Resampling.BILINEAR,
    InterpolationMode.BICUBIC: Image.Resampling.BICUBIC,
}
_Box = tuple[float, float, float, float]  # (left, top, right, bottom) in pixels of the full image


class CropFirst(nn.Module):
    """A ranklit transform that can also take the image file and decode it at the size its crop needs.

    Called on an image (PIL or tensor) it is the wrapped transform; :meth:`from_file` is what a
    :class:`ranklit.data.ImageRetrievalDataset` calls with the file's path (see the module docstring).
    """

    encode = False  # from_file hands over the JPEG's bytes and the crop drawn for it (module docstring)

    def __init__(self, transform: v2.Compose, on_device: bool = False) -> None:
        super().__init__()
        modules = list(transform.transforms)
        if on_device and _normalises(modules):  # the uint8 crop: scaled and normalised on the device
            modules = [*modules[: -len(_NORMALISATION)], v2.ToPureTensor()]
            transform = v2.Compose(modules)
        self.transform, self.crop = transform, modules[1]
        rest = modules[2:]  # (the centre crop,) the flip, the normalisation
        self.filter = _PIL_FILTERS[self.crop.interpolation]
        self.tail = kernels(rest)  # after Pillow's resampling of a reduced decode
        first: nn.Module = self.crop  # the evaluation transform on the full image
        if isinstance(self.crop, v2.RandomResizedCrop):  # a training crop of the full image: this resize, the rest
            first = v2.Resize(self.crop.size, interpolation=self.crop.interpolation, antialias=self.crop.antialias)
        self.full_tail = kernels([first, *rest])
        flips = [module.p for module in rest if type(module) is v2.RandomHorizontalFlip]
        self.flip_p: float | None = flips[0] if flips else None
        self.centre: tuple[int, int] | None = None
        if isinstance(modules[2], v2.CenterCrop):
            self.centre = (modules[2].size[0], modules[2].size[-1])
        # the device can take over when nothing but the flip, the centre crop and the uint8 tensor follow the crop
        self.encodable = all(type(module) in _ENCODABLE_TAIL for module in rest)

    def forward(self, image: Any) -> Any:
        return self.transform(image)

    def from_file(self, path: str | Path) -> Tensor | EncodedImage:
        """The transform of the image at ``path``, decoded at the largest reduction its crop allows (from
        :data:`REDUCE_FROM` pixels on); with ``encode``, the file's JPEG bytes and the crop drawn for it where the
        device decoder takes the file."""
        if self.encode:
            encoded = read_encoded(path, self._geometry)
            if encoded is not None:
                return encoded
        plan: list[tuple[_Box, tuple[int, int]]] = []

        def reduction(width: int, height: int) -> int:
            box, size = self._box(width, height)
            plan.append((box, size))
            if width * height < REDUCE_FROM:
                return 1
            return _largest_reduction(min((box[2] - box[0]) / size[0], (box[3] - box[1]) / size[1]), 1)

        image, factor = _decode(path, reduction, tensor=True)
        (left, top, right, bottom), size = plan[0]
        if isinstance(image, Image.Image) and factor > 1:
            box = (left / factor, top / factor, right / factor, bottom / factor)
            return self.tail(F.pil_to_tensor(image.resize(size, self.filter, box=box)))
        if isinstance(self.crop, v2.RandomResizedCrop):  # this crop, then this resize: bit-identical
            left, top, right, bottom = int(left), int(top), int(right), int(bottom)
            if isinstance(image, Image.Image):  # cut before converting to a tensor: a copy of the crop only
                return self.full_tail(F.pil_to_tensor(image.crop((left, top, right, bottom))))
            return self.full_tail(image[:, top:bottom, left:right])  # a view of the tensor torchvision decoded
        return self.full_tail(F.pil_to_tensor(image) if isinstance(image, Image.Image) else image)

    def _geometry(self, width: int, height: int) -> Geometry:
        """The box and output size :meth:`from_file` draws, then the flip's draw (``_kernels._flip``'s)."""
        (left, top, right, bottom), (out_width, out_height) = self._box(width, height)
        flip = self.flip_p is not None and bool(torch.rand(1) < self.flip_p)
        box = (int(left), int(top), int(right), int(bottom))
        return Geometry(box, (out_height, out_width), self.centre, flip, self.crop.interpolation)

    def _box(self, width: int, height: int) -> tuple[_Box, tuple[int, int]]:
        """The box the crop (or the resize) maps to its output, and that output's ``(width, height)``."""
        if isinstance(self.crop, v2.RandomResizedCrop):
            canvas = torch.zeros(1, 1, dtype=torch.uint8).expand(height, width)  # the size, no pixels
            top, left, h, w = RandomResizedCrop.get_params(canvas, list(self.crop.scale), list(self.crop.ratio))
            return (left, top, left + w, top + h), (self.crop.size[1], self.crop.size[0])
        whole = tv_tensors.BoundingBoxes([[0, 0, width, height]], format="XYXY", canvas_size=(height, width))
        resized = v2.functional.resize(whole, self.crop.size, max_size=self.crop.max_size)
        return (0, 0, width, height), (resized.canvas_size[1], resized.canvas_size[0])


_NORMALISATION = (v2.ToDtype, v2.Normalize, v2.ToPureTensor)  # the end of ranklit's transforms
_ENCODABLE_TAIL = (v2.RandomHorizontalFlip, v2.CenterCrop, v2.ToPureTensor)


def _normalises(modules: list[nn.Module]) -> bool:
    """Whether ``modules`` end as ranklit's transforms do: scaled to ``[0, 1]`` floats, normalised, a plain tensor."""
    tail = modules[-len(_NORMALISATION) :]
    kinds = [type(module) for module in tail]
    return kinds == list(_NORMALISATION) and tail[0].dtype == torch.float32 and bool(tail[0].scale)


def normalise_on_device(images: Tensor, mean: Sequence[float], std: Sequence[float]) -> Tensor:
    """A batch of ``uint8`` images ``[B, C, H, W]`` scaled to ``[0, 1]`` and normalised, as ranklit's transforms do
    (torchvision's ``to_dtype(scale=True)`` then ``normalize``: the same values as in the loader worker).

    Example:
        >>> normalise_on_device(torch.full((1, 3, 1, 1), 255, dtype=torch.uint8), (0.5,) * 3, (0.5,) * 3).flatten()
        tensor([1., 1., 1.])
    """
    return F.normalize(F.to_dtype(images, torch.float32, scale=True), mean=list(mean), std=list(std), inplace=True)


def crop_first(transform: Any, on_device: bool = False) -> Any:
    """``transform`` as a :class:`CropFirst` when it is ranklit's training or evaluation transform with a bilinear or
    bicubic resize (``ToImage``, then ``RandomResizedCrop`` or ``Resize`` + ``CenterCrop``), else unchanged. With
    ``on_device``, a transform ending in ranklit's scaling and normalisation stops before them (module docstring).

    Example:
        >>> from ranklit.data.images.transforms import test_transform, train_transform
        >>> type(crop_first(train_transform(224))).__name__, type(crop_first(test_transform(256, 224))).__name__
        ('CropFirst', 'CropFirst')
        >>> type(crop_first(v2.Compose([v2.ToImage()]))).__name__
        'Compose'
    """
    modules = list(getattr(transform, "transforms", []))
    if len(modules) < 3 or not isinstance(modules[0], v2.ToImage):
        return transform
    crop = modules[1]
    known = isinstance(crop, v2.RandomResizedCrop) or (
        isinstance(crop, v2.Resize) and isinstance(modules[2], v2.CenterCrop)
    )
    if not known or crop.interpolation not in _PIL_FILTERS or not crop.antialias:
        return transform
    return CropFirst(transform, on_device)
