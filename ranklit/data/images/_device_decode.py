"""The device's half of decoding on the device: a batch's JPEG bytes decoded, cropped, resized and flipped there.

:func:`decode_encoded` takes the :class:`ranklit.data.images._encoded.EncodedImages` of a batch (the bytes on the CPU,
as the decoders want them) and the batch's ``uint8`` images on their device, decodes every JPEG in one batched call
(nvJPEG on CUDA), applies the EXIF orientation (views and flips, :mod:`ranklit.data.images._tensor_jpeg`), crops the box
drawn in the worker, resizes it with torchvision's ``F.resize`` (the interpolation and antialiasing of the CPU path),
centre-crops (evaluation) and flips, and writes each result into its place in the batch.

**The decoder** (:func:`device_decoder`, once per process and device): TorchCodec's ``decode_jpeg`` where it is
installed (the successor of torchvision's decoders, deprecated from torchvision 0.29 on), else torchvision's
``decode_jpeg``; each candidate must decode the probe JPEGs of :mod:`ranklit.data.images._tensor_jpeg` (every chroma
layout, progressive, grayscale) on that device to Pillow's pixels within :data:`PROBE_TOLERANCE`. None does (none is
installed, it fails on the device, or it disagrees): ``None``, and the datamodule keeps the CPU path.

**Same pixels**: on the CPU the decoder is libjpeg-turbo as on the CPU path, the crop a view and the resize the same
``uint8`` kernel, so the output is bit-identical to the CPU path below 1 megapixel (above it the CPU path decodes at
a reduced size: the reduced decoding's tolerance), tested in ``tests/data/test_device_decode.py``. nvJPEG's IDCT and
chroma upsampling are not libjpeg's, and on CUDA the ``uint8`` resize runs in float: the difference is tested under
``-m gpu`` (``tests/test_gpu.py``) with a tolerance not yet measured on a GPU.

**A JPEG the decoder rejects** (its header and end marker were fine in the worker): the batch is decoded one image at
a time, and a rejected image takes the CPU route in this process (:func:`ranklit.data.images.decoding._decode`, Pillow
where
torchvision declines): the same pixels, or the CPU path's one-line error naming the file. Here, after the hand-over,
``data.on_bad_image: skip`` cannot replace it any more: such a file stops the run (``ranklit data check`` finds it).
Only an error that means "this image cannot be decoded here" takes that route (:func:`rejects_image`): CUDA's
out-of-memory and CUDA errors (a sticky fault, a launch failure) propagate, as from any other step.

**Memory**: the batch is decoded :data:`DECODE_GROUP` images at a time, each group finished (cropped, resized) into
the batch before the next is decoded.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

import torch
from torch import Tensor
from torchvision.io import ImageReadMode
from torchvision.transforms.v2 import functional as F

from ranklit.data.images._encoded import EncodedImages, Geometry
from ranklit.data.images._tensor_jpeg import _ORIENTED, _pillow, _probes
from ranklit.data.images.decoding import _decode

__all__ = ["DECODE_GROUP", "PROBE_TOLERANCE", "decode_encoded", "device_decoder", "rejects_image"]

DECODE_GROUP = 16
"""Images decoded by one batched call: at most this many full-size decodes are alive at once (16 photos of 12
megapixels: 580 MB), each cropped and resized into the batch before the next group is decoded."""

PROBE_TOLERANCE = {"cpu": 0.0, "cuda": 2.0}
"""Largest mean absolute difference (of 255) from Pillow's pixels on a probe JPEG for a decoder to be used, by device
type: exact on the CPU (libjpeg-turbo); on CUDA a bound for nvJPEG's IDCT and upsampling, not yet measured."""

Decoder = Callable[[list[Tensor], torch.device], list[Tensor]]


def _torchvision() -> Decoder | None:
    try:
        from torchvision.io import decode_jpeg
    except ImportError:  # a torchvision without image decoding
        return None

    def decode(data: list[Tensor], device: torch.device) -> list[Tensor]:
        with warnings.catch_warnings():  # torchvision >= 0.29 deprecates its decoders (the user did not call them)
            warnings.simplefilter("ignore", DeprecationWarning)
            return list(decode_jpeg(data, mode=ImageReadMode.RGB, device=device))

    return decode


def _torchcodec() -> Decoder | None:
    try:
        from torchcodec.decoders import decode_jpeg
    except ImportError:
        return None

    def decode(data: list[Tensor], device: torch.device) -> list[Tensor]:
        return [decode_jpeg(piece, mode="RGB", device=device) for piece in data]

    return decode


@functools.cache
def device_decoder(device: torch.device) -> Decoder | None:
    """The first decoder (TorchCodec's, torchvision's) that decodes the probe JPEGs on ``device`` as Pillow does
    within :data:`PROBE_TOLERANCE`; ``None`` where none does (module docstring)."""
    probes = _probes()
    expected = [_pillow(probe) for probe in probes]
    tolerance = PROBE_TOLERANCE.get(device.type, PROBE_TOLERANCE["cuda"])
    for candidate in (_torchcodec(), _torchvision()):
        if candidate is None:
            continue
        try:
            images = candidate([torch.frombuffer(bytearray(probe), dtype=torch.uint8) for probe in probes], device)
        except (RuntimeError, ValueError, TypeError, OSError):  # fails on this device, or an API it does not take
            continue
        if all(_agrees(image, pillow, tolerance) for image, pillow in zip(images, expected, strict=True)):
            return candidate
    return None


def _agrees(image: Tensor, pillow: Tensor, tolerance: float) -> bool:
    if image.shape != pillow.shape or image.dtype != torch.uint8:
        return False
    return float((image.cpu().float() - pillow.float()).abs().mean()) <= tolerance


def rejects_image(error: BaseException) -> bool:
    """Whether a decoder's ``error`` means "this image cannot be decoded on the device" (then the CPU route decodes
    it); CUDA's out-of-memory and CUDA errors do not (they propagate).

    >>> rejects_image(RuntimeError("nvjpeg: unsupported")), rejects_image(RuntimeError("CUDA error: an illegal ..."))
    (True, False)
    """
    if isinstance(error, torch.cuda.OutOfMemoryError) or not isinstance(error, (RuntimeError, ValueError)):
        return False
    text = str(error)
    return not any(sign in text for sign in ("CUDA error", "CUDA out of memory", "cudaError", "CUDA driver"))


def decode_encoded(encoded: EncodedImages, images: Tensor) -> Tensor:
    """``images`` (``uint8`` ``[B, 3, H, W]`` on its device) with the ``encoded`` images decoded, cropped, resized and
    flipped in their places (module docstring), :data:`DECODE_GROUP` at a time; the CPU route for what the decoder
    rejects."""
    pieces = encoded.pieces()
    for first in range(0, len(pieces), DECODE_GROUP):
        group = slice(first, first + DECODE_GROUP)
        decoded = _decode_all(pieces[group], encoded.paths[group], encoded.orientations[group], images.device)
        for position, image, geometry in zip(encoded.positions[group], decoded, encoded.geometries[group],
                                             strict=True):
            images[position] = _finish(image, geometry)
    return images


def _decode_all(pieces: list[Tensor], paths: list[str], orientations: list[int], device: torch.device) -> list[Tensor]:
    """Every image as displayed (EXIF orientation applied), on ``device``: one batched call, else one by one, a
    rejected one by the CPU route (which raises the CPU path's error for a file nothing decodes)."""
    decoder = device_decoder(device)
    oriented = [_ORIENTED[orientation] for orientation in orientations]
    if decoder is not None:
        try:
            return [turn(image) for turn, image in zip(oriented, decoder(pieces, device), strict=True)]
        except (RuntimeError, ValueError) as error:  # one bad image fails the batched call: find it
            if not rejects_image(error):
                raise
    images = []
    for piece, path, turn in zip(pieces, paths, oriented, strict=True):
        try:
            if decoder is None:
                raise ValueError("no device decoder")
            images.append(turn(decoder([piece], device)[0]))
        except (RuntimeError, ValueError) as error:
            if not rejects_image(error):
                raise
            image = _decode(path, lambda width, height: 1, tensor=True)[0]  # oriented; the CPU path's error
            images.append((image if isinstance(image, Tensor) else F.pil_to_tensor(image)).to(device))
    return images


def _finish(image: Tensor, geometry: Geometry) -> Tensor:
    """The crop, resize, centre crop and flip of :class:`~ranklit.data.images._encoded.Geometry` (the CPU path's
    calls)."""
    left, top, right, bottom = geometry.box
    image = F.resize(image[:, top:bottom, left:right], list(geometry.size), interpolation=geometry.interpolation,
                     antialias=True)
    if geometry.centre is not None:
        image = F.center_crop(image, list(geometry.centre))
    return F.horizontal_flip(image) if geometry.flip else image
