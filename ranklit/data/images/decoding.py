"""Image files decoded to the 8-bit RGB image a transform expects, whatever mode Pillow opens them in.

What :func:`load_image` does with each kind of file Pillow opens:

- **EXIF orientation** is applied (a phone photograph taken upright loads upright).
- **Animated GIF / WebP / multi-page TIFF**: the first frame.
- **Grayscale** ``1``/``L``: replicated to three channels. **16-bit and 32-bit integer grayscale** (``I;16*``, ``I``:
  16-bit PNG and TIFF) is scaled by its range, ``v8 = round(v * 255 / 65535)`` (values above 65535 saturate); **float**
  (``F``) by ``[0, 1]`` when every value lies there, else clipped to ``[0, 255]``. Pillow's own conversion clips these
  to 0 or 255.
- **Transparency** (``LA``, ``RGBA``, ``PA``, palette or RGB with a transparent colour): composited over
  ``BACKGROUND`` (white), ``out = a · rgb + (1 − a) · 255``; a logo drawn in black with the shape in its alpha channel
  loads as a black shape on white, not as a black square.
- **Palette**, **CMYK**, **YCbCr**, **LAB**, **HSV**: Pillow's conversion to RGB.

The conversion to RGB is :func:`ranklit.data.images.preprocess.to_rgb`, the one a server runs too (``ranklit export``
writes that file beside the model).

**Reduced-size JPEG decoding** (``min_side``): a JPEG can be decoded at 1/2, 1/4 or 1/8 of its size in the DCT domain
(Pillow's ``draft``), faster. :func:`load_image` uses the largest reduction that keeps the decoded image's
*relevant side* at least ``min_side`` pixels, so every crop a transform then takes is still *downscaled* to its output
size: what the crop sees changes only by the resampling filter (a tolerance measured in ``tests/data``: mean absolute
difference under 1.5 of 255 on a photograph-like image). :func:`relevant_side` says which side. ranklit's own
transforms choose the reduction per sampled crop instead (``RetrievalDataModule``; the GPU docs page, "The data path").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from PIL import Image, ImageOps, UnidentifiedImageError
from torch import Tensor

from ranklit.data.images._tensor_jpeg import decode_rgb
from ranklit.data.images._unreadable import outside_a_run, unreadable_image
from ranklit.data.images.preprocess import BACKGROUND, to_rgb

__all__ = ["BACKGROUND", "IMAGE_EXTENSIONS", "load_image", "outside_a_run", "relevant_side"]

IMAGE_EXTENSIONS: tuple[str, ...] = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff")
"""The file extensions (any case) the folder datasets read; other files are skipped and counted."""

_ORIENTATION = 0x0112  # the EXIF tag
_TRANSPOSING = (5, 6, 7, 8)  # orientations that swap width and height


def relevant_side(width: int, height: int, area_fraction: float) -> float:
    """The shortest side, in pixels of the full image, of any crop covering at least ``area_fraction`` of the image
    (``scale[0] × ratio[0]`` of a RandomResizedCrop; ``1`` for a resize of the whole image): ``min(w, h,
    sqrt(area_fraction · w · h))``.

    >>> relevant_side(1000, 750, 1.0), relevant_side(1000, 750, 0.16 * 0.75)
    (750, 300.0)
    """
    return min(width, height, math.sqrt(area_fraction * width * height))


def load_image(path: str | Path, *, min_side: int | None = None, area_fraction: float = 1.0) -> Image.Image:
    """Decode an image file as 8-bit RGB (module docstring: modes, transparency, orientation, first frame).

    Args:
        path: the image file.
        min_side: with a JPEG, decode at the largest size reduction (1/2, 1/4, 1/8) that keeps
            :func:`relevant_side` ``(w, h, area_fraction)`` at least ``min_side`` pixels; ``None``: full size.
        area_fraction: the smallest fraction of the image a crop covers (see :func:`relevant_side`).

    Raises:
        FileNotFoundError: the file does not exist (the message names it).
        ValueError: the file exists but cannot be decoded: a :class:`~ranklit.errors.UserError` naming it, the cause
            (truncated, permission denied, too many pixels) and the fix (:mod:`ranklit.data.images._unreadable`).

    Example:
        >>> load_image("/nonexistent/x.jpg")
        Traceback (most recent call last):
        ...
        FileNotFoundError: Image file not found: /nonexistent/x.jpg
    """
    def reduction(width: int, height: int) -> int:
        return 1 if min_side is None else _largest_reduction(relevant_side(width, height, area_fraction), min_side)

    image = _decode(path, reduction)[0]
    assert isinstance(image, Image.Image)  # a tensor only when asked for
    return image


def _largest_reduction(side: float, min_side: float) -> int:
    """The largest JPEG reduction (8, 4, 2 or 1) that keeps ``side`` pixels at least ``min_side``: ``side / r >=
    min_side``.

    >>> _largest_reduction(480, 224), _largest_reduction(447, 224), _largest_reduction(4000, 224)
    (2, 1, 8)
    """
    return max([r for r in (8, 4, 2) if side / r >= min_side], default=1)


def _decode(
    path: str | Path, reduction: Callable[[int, int], int], *, tensor: bool = False
) -> tuple[Image.Image | Tensor, int]:
    """The image, 8-bit RGB, and the reduction it was decoded at: ``reduction(width, height)`` (1, 2, 4 or 8), asked
    with the size as displayed (EXIF orientation applied) read from the file's header before any pixel is decoded,
    applies to a JPEG; any other file is decoded at full size (reduction 1). A JPEG of ``w × h`` pixels decoded at
    reduction ``r`` is ``ceil(w / r) × ceil(h / r)``: its pixel ``x`` covers the full image's ``[r x, r x + r)``.
    With ``tensor``, an RGB or grayscale JPEG at reduction 1 comes as the same pixels in a ``uint8`` tensor ``[3, H,
    W]`` where torchvision can decode it so (:func:`ranklit.data.images._tensor_jpeg.decode_rgb`)."""
    path = Path(path)
    try:
        with Image.open(path) as image:
            orientation = image.getexif().get(_ORIENTATION, 1)
            width, height = image.size[::-1] if orientation in _TRANSPOSING else image.size
            stored, factor = image.size, reduction(width, height)
            if tensor and factor == 1 and image.format == "JPEG" and image.mode in ("RGB", "L"):
                decoded = decode_rgb(path, orientation)
                if decoded is not None:
                    return decoded, 1
            if factor > 1 and image.format == "JPEG":
                image.draft("RGB", (image.width // factor, image.height // factor))  # Pillow picks this factor
            factor = next(r for r in (1, 2, 4, 8) if image.size == tuple(-(-side // r) for side in stored))
            image.seek(0)
            image.load()
            if orientation != 1:
                image = ImageOps.exif_transpose(image)
            return to_rgb(image), factor
    except FileNotFoundError:
        raise FileNotFoundError(f"Image file not found: {path}") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError, Image.DecompressionBombError) as error:
        raise unreadable_image(path, error) from error  # a UserError (a ValueError) with the fix for its cause
