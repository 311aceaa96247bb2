"""Why an image file cannot be read, as one :class:`~ranklit.errors.UserError` line naming the file and the fix.

:func:`ranklit.data.images.decoding.load_image` raises it for every file it cannot turn into an image; the ``ranklit``
command prints it as ``error: ...`` (exit 2), from the main process or a loader worker alike, and
``data.on_bad_image: skip`` skips the file (a ``UserError`` is a ``ValueError``). The advice depends on the cause:

- **permission denied**: make the file readable by the user running ranklit (``chmod a+r FILE``);
- **too many pixels**: Pillow refuses an image of more than ``2 × Image.MAX_IMAGE_PIXELS`` pixels (about 179
  megapixels) as a possible *decompression bomb* (a small file that expands to gigabytes); downscale the file;
- **anything else** (truncated, corrupt, not an image): re-extract or remove the file.

Each also says that ``data.on_bad_image: skip`` replaces such a file of a training set by another image of its class
(an evaluation image is never replaced: :class:`ranklit.data.RetrievalDataModule`); an image read outside a run (an
index's, a search's query: :data:`NO_SKIP`, :func:`outside_a_run`) gets the advice without it.
"""

from __future__ import annotations

import re
from pathlib import Path

from PIL import Image

from ranklit.errors import UserError

__all__ = ["EVALUATION_STOP", "NO_SKIP", "evaluation_image", "outside_a_run", "unreadable_image"]

EVALUATION_STOP = "stop-evaluation"
"""``on_bad_image`` of an evaluation set when the run asked for ``skip``: it stops, saying that skip is not for it."""
NO_SKIP = "stop-outside-a-run"
"""``on_bad_image`` of images read outside a run (``ranklit index``, ``ranklit search``, ``Retriever``): it stops,
with advice that does not speak of ``data.on_bad_image``, a setting such images do not have."""

_SKIP = "or, in a training set, set `data.on_bad_image: skip` to replace it by another image of its class"


def unreadable_image(path: str | Path, error: BaseException) -> UserError:
    """The error of an image file that exists but cannot be decoded (module docstring: the advice per cause).

    Example:
        >>> print(unreadable_image("a/b.jpg", PermissionError(13, "Permission denied")))  # doctest: +ELLIPSIS
        Could not decode image a/b.jpg: permission denied; make it readable (chmod a+r), or, in a training set, ...
    """
    if isinstance(error, PermissionError):
        return UserError(f"Could not decode image {path}: permission denied; make it readable (chmod a+r), {_SKIP}.")
    if isinstance(error, Image.DecompressionBombError):
        pixels = re.search(r"\d+ pixels", str(error))
        return UserError(
            f"Could not decode image {path}: {pixels.group(0) if pixels else 'too many pixels'}, more than the "
            f"{2 * (Image.MAX_IMAGE_PIXELS or 0)} Pillow decodes (a possible decompression bomb); downscale the file, "
            f"{_SKIP}."
        )
    cause = str(error).splitlines()[0] if str(error) else type(error).__name__
    return UserError(f"Could not decode image {path}: {cause}. Re-extract or remove this file, {_SKIP}.")


def evaluation_image(error: BaseException, owner: str, split: str | None) -> UserError:
    """The error of an undecodable image of an evaluation set whose run set ``data.on_bad_image: skip``: skip applies
    to training sets only (a replaced query or gallery image would change the metric).

    Example:
        >>> print(evaluation_image(UserError(f"Could not decode image a.jpg: truncated. Re-extract or remove this "
        ...                                  f"file, {_SKIP}."), "CSVDataset", "test"))  # doctest: +ELLIPSIS
        Could not decode image a.jpg: truncated. Re-extract or remove this file. It is an evaluation image ...
    """
    message = outside_a_run(error)
    where = f"{owner}, split {split!r}" if split is not None else owner
    return UserError(
        f"{message} It is an evaluation image ({where}): `data.on_bad_image: skip` replaces training images only "
        "(a replaced query or gallery image would change the metric), so fix or remove this file."
    )


def outside_a_run(error: BaseException) -> str:
    """The message of :func:`unreadable_image` without its ``data.on_bad_image: skip`` advice, for an image that no
    training set holds (an evaluation image, an index's or a search's image).

    Example:
        >>> print(outside_a_run(unreadable_image("a.jpg", OSError("image file is truncated"))))
        Could not decode image a.jpg: image file is truncated. Re-extract or remove this file.
    """
    return str(error).replace(f", {_SKIP}.", ".")
