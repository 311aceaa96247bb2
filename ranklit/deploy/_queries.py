"""What :class:`ranklit.deploy.Retriever` takes as a query tensor, checked before anything is embedded.

A query tensor is one of three things, told apart by its dtype and shape:

* **pixels**: ``uint8`` ``[3, H, W]`` (or a batch ``[B, 3, H, W]``) of values 0-255, preprocessed as the card says
  (resize, crop, normalise), like an image file or a PIL image;
* **network inputs**: floating ``[3, H, W]`` / ``[B, 3, H, W]``, already preprocessed: ``H x W`` is the card's input
  size and every value lies in the range the card's normalisation gives to pixels in ``[0, 1]``
  (``[min_c (0 - mean_c) / std_c, max_c (1 - mean_c) / std_c]``, with :data:`RANGE_SLACK` for the overshoot of a
  bicubic resize);
* **descriptors**: floating ``[B, D]`` with ``D`` the model's embedding size (unit norm when the model's output is
  L2-normalised).

Anything else is refused with one :class:`~ranklit.errors.UserError` that says what was received and what to give:
another dtype, channels last (``[H, W, 3]``: ``permute``), raw pixels as floats (0-255: pass them as ``uint8``), NaN or
infinite values, another size, descriptors of another size or norm.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ranklit.errors import UserError

__all__ = ["RANGE_SLACK", "check_query_tensor", "input_range"]

RANGE_SLACK = 0.5
"""How far (in normalised units) a network input may lie outside the range of normalised ``[0, 1]`` pixels."""

_WHAT = ("give uint8 pixels [3, H, W] (0-255; or an image file, a PIL image), float network inputs [B, 3, H, W] "
         "already preprocessed as the index's card says, or float descriptors [B, D]")


def input_range(card: dict[str, Any]) -> tuple[float, float]:
    """The range of the normalised values of pixels in ``[0, 1]`` under the card's mean and std.

    >>> input_range({"preprocessing": {"mean": [0.5, 0.5, 0.5], "std": [0.25, 0.5, 0.5]}})
    (-2.0, 2.0)
    """
    p = card["preprocessing"]
    low = [(0.0 - m) / s for m, s in zip(p["mean"], p["std"], strict=True)]
    high = [(1.0 - m) / s for m, s in zip(p["mean"], p["std"], strict=True)]
    return min(low), max(high)


def check_query_tensor(query: Tensor, card: dict[str, Any]) -> str:
    """``"pixels"``, ``"inputs"`` or ``"descriptors"`` (module docstring); anything else is a :class:`UserError`.

    Example:
        >>> card = {"preprocessing": {"mean": [0.5] * 3, "std": [0.5] * 3},
        ...         "input": {"height": 4, "width": 4}, "output": {"embedding_dim": 8, "l2_normalised": False}}
        >>> check_query_tensor(torch.zeros(3, 4, 4, dtype=torch.uint8), card)
        'pixels'
        >>> check_query_tensor(torch.zeros(4, 4, 3, dtype=torch.uint8), card)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ranklit.errors.UserError: a query tensor of shape [4, 4, 3] is channels last: give [3, H, W] (query.permute(...
    """
    shape = list(query.shape)
    if query.dtype == torch.uint8:
        _check_layout(query, "pixels")
        return "pixels"
    if not query.is_floating_point():
        raise UserError(f"a query tensor of dtype {query.dtype} (shape {shape}): {_WHAT}.")
    if not bool(torch.isfinite(query).all()):
        bad = int((~torch.isfinite(query)).sum())
        raise UserError(f"a query tensor of shape {shape} holds {bad} NaN or infinite values: {_WHAT}.")
    if query.ndim == 2:
        return _check_descriptors(query, card)
    _check_layout(query, "inputs")
    low, high = input_range(card)
    seen = (float(query.min()), float(query.max())) if query.numel() else (low, high)
    if seen[0] < low - RANGE_SLACK or seen[1] > high + RANGE_SLACK:
        raise UserError(
            f"a float query tensor is taken as network inputs, already normalised (values in about "
            f"[{low:.2f}, {high:.2f}]); this one spans [{seen[0]:.4g}, {seen[1]:.4g}]: raw pixels go as a uint8 "
            "tensor (query.round().to(torch.uint8) for 0-255 values) or a PIL image, to be preprocessed as the card "
            "says."
        )
    size = (int(card["input"]["height"]), int(card["input"]["width"]))
    if tuple(shape[-2:]) != size:
        raise UserError(f"a float query tensor of shape {shape} is taken as network inputs, whose size is "
                        f"{size[0]} x {size[1]} (the index's card): preprocess it as the card says, or give uint8 "
                        "pixels to have it done.")
    return "inputs"


def _check_layout(query: Tensor, kind: str) -> None:
    shape = list(query.shape)
    if query.ndim in (3, 4) and shape[-3] == 3:
        return
    if query.ndim in (3, 4) and shape[-1] == 3:
        order = "2, 0, 1" if query.ndim == 3 else "0, 3, 1, 2"
        layout = "[3, H, W]" if query.ndim == 3 else "[B, 3, H, W]"
        raise UserError(f"a query tensor of shape {shape} is channels last: give {layout} (query.permute({order})).")
    raise UserError(f"a {query.dtype} query tensor of shape {shape} is not an RGB image [3, H, W] or a batch "
                    f"[B, 3, H, W] ({kind}): {_WHAT}.")


def _check_descriptors(query: Tensor, card: dict[str, Any]) -> str:
    dim = int(card["output"]["embedding_dim"])
    if query.shape[1] != dim:
        raise UserError(f"descriptors of size {query.shape[1]} given; this index's model gives {dim}: embed the "
                        "queries with the index's model.")
    if card["output"].get("l2_normalised") and query.numel():
        norms = query.double().norm(dim=1)
        if bool(((norms - 1).abs() > 1e-3).any()):
            raise UserError(f"descriptors of norm {float(norms.min()):.4g} to {float(norms.max()):.4g} given; this "
                            "index's model gives unit vectors: L2-normalise them "
                            "(torch.nn.functional.normalize(query, dim=1)).")
    return "descriptors"
