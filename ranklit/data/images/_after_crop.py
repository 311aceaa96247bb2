"""The steps of ranklit's transforms after the crop (resize, centre crop, flip, scaling, normalisation), run as direct
calls of torchvision's functional API on a ``uint8`` image tensor.

A ``v2`` module flattens its input, checks it and dispatches on every call; for a 224×224 image that costs more
than the arithmetic (~0.2 ms an item for resize, flip, ``ToDtype`` and ``Normalize``). :func:`kernels` calls the
functions the modules call, with their arguments and their random draw (the flip: one ``torch.rand(1)``, flipped
when below ``p``), so the output and the random state after it are the modules' (tested in
``tests/data/test_crop_first.py`` and ``tests/data/test_tensor_jpeg.py``); the normalisation runs in place on the
tensor ``ToDtype`` made. A module it does not know leaves the whole sequence to ``v2.Compose``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import cast

import torch
from torch import Tensor, nn
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

__all__ = ["kernels"]

_Step = Callable[[Tensor], Tensor]


def kernels(modules: Sequence[nn.Module]) -> nn.Module:
    """``v2.Compose([v2.ToImage(), *modules])`` for a ``uint8`` image tensor ``[C, H, W]``: direct function calls
    where every module is one of ``Resize``, ``CenterCrop``, ``RandomHorizontalFlip``, ``ToDtype``, ``Normalize``,
    ``ToPureTensor``, else that ``Compose``.

    Example:
        >>> steps = [v2.CenterCrop(2), v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.5], [0.5])]
        >>> kernels(steps)(torch.full((1, 4, 4), 255, dtype=torch.uint8)).tolist()
        [[[1.0, 1.0], [1.0, 1.0]]]
    """
    steps = [_step(module) for module in modules]
    known = [step for step in steps if step is not None]
    return _Steps(known) if len(known) == len(steps) else v2.Compose([v2.ToImage(), *modules])


class _Steps(nn.Module):
    """The functions in turn (a module, so that it pickles to loader workers and prints in the transform)."""

    def __init__(self, steps: list[_Step]) -> None:
        super().__init__()
        self.steps = steps

    def forward(self, image: Tensor) -> Tensor:
        for step in self.steps:
            image = step(image)
        return image


def _step(module: nn.Module) -> _Step | None:
    """The call ``module`` makes (``Normalize`` in place: on a ``uint8`` image its input is the float tensor an
    earlier ``ToDtype`` made, which no one else holds)."""
    if type(module) is v2.RandomHorizontalFlip:
        return partial(_flip, p=cast(float, module.p))
    if type(module) is v2.Resize:
        return partial(
            F.resize, size=module.size, interpolation=module.interpolation, max_size=module.max_size,
            antialias=module.antialias,
        )
    if type(module) is v2.CenterCrop:
        return partial(F.center_crop, output_size=module.size)
    if type(module) is v2.ToDtype and isinstance(module.dtype, torch.dtype):
        return partial(F.to_dtype, dtype=module.dtype, scale=module.scale)
    if type(module) is v2.Normalize:
        return partial(F.normalize, mean=module.mean, std=module.std, inplace=True)
    if type(module) is v2.ToPureTensor:
        return _pure
    return None


def _flip(image: Tensor, p: float) -> Tensor:
    return image if torch.rand(1) >= p else F.horizontal_flip(image)  # v2's _RandomApplyTransform: the same draw


def _pure(image: Tensor) -> Tensor:
    return image.as_subclass(Tensor)
