"""Training and test transforms of the reference experiments ([spec §4][spec-experiments]), optionally sized by timm.

Training: ``RandomResizedCrop(image_size, scale=(0.16, 1), ratio=(3/4, 4/3))`` + horizontal flip; test: resize the
shorter side to ``resize_size`` then ``CenterCrop(crop_size)`` (e.g. 288 → 256 for ROADMAP CUB/SOP, 256 → 224 for
iNaturalist). Both accept PIL images or ``uint8`` tensors ``[3, H, W]`` and return normalised ``float32`` tensors
``[3, size, size]``. :func:`transforms_from_timm` reads the mean, std, input size, crop fraction and interpolation
from a timm model's data configuration instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn
from torchvision.transforms import InterpolationMode, v2

from ranklit._checks import check_flag, check_positive_int

__all__ = [
    "full_size_transform",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "train_transform",
    "test_transform",
    "timm_data_config",
    "transforms_from_timm",
]

IMAGENET_MEAN: tuple[float, float, float] = (0.485, 0.456, 0.406)
IMAGENET_STD: tuple[float, float, float] = (0.229, 0.224, 0.225)


def _size(value: int, name: str) -> int:
    return check_positive_int(name, value, " number of pixels")


def _interpolation(name: str) -> InterpolationMode:
    try:
        return InterpolationMode(name)
    except ValueError:
        choices = ", ".join(mode.value for mode in InterpolationMode)
        raise ValueError(f"`interpolation` must be one of {choices}; got {name!r}.") from None


def _to_normalised_tensor(mean: tuple[float, ...], std: tuple[float, ...]) -> list[nn.Module]:
    return [v2.ToDtype(torch.float32, scale=True), v2.Normalize(mean=list(mean), std=list(std)), v2.ToPureTensor()]


def train_transform(
    image_size: int,
    *,
    scale: tuple[float, float] = (0.16, 1.0),
    ratio: tuple[float, float] = (3 / 4, 4 / 3),
    mean: tuple[float, ...] = IMAGENET_MEAN,
    std: tuple[float, ...] = IMAGENET_STD,
    interpolation: str = "bilinear",
    hflip: bool = True,
) -> v2.Compose:
    """RandomResizedCrop + horizontal flip + normalisation: every paper's training augmentation
    ([spec §4][spec-experiments]).

    Args:
        image_size: side of the square crop (224 or 256 in the reference configs).
        scale: range of the crop's area as a fraction of the image's.
        ratio: range of the crop's aspect ratio.
        mean: per-channel mean subtracted after scaling to [0, 1].
        std: per-channel standard deviation divided by.
        interpolation: torchvision interpolation name ("bilinear", "bicubic", ...).
        hflip: flip half of the crops horizontally (default); ``False`` for classes that a mirror image changes
            (arrows, text, mirrored products: a flipped image would be a positive of the wrong class).

    Example:
        >>> image = torch.randint(0, 256, (3, 40, 60), dtype=torch.uint8)
        >>> out = train_transform(32)(image)
        >>> out.shape, out.dtype
        (torch.Size([3, 32, 32]), torch.float32)
    """
    return v2.Compose(
        [
            v2.ToImage(),
            v2.RandomResizedCrop(
                _size(image_size, "image_size"),
                scale=scale,
                ratio=ratio,
                interpolation=_interpolation(interpolation),
                antialias=True,
            ),
            *([v2.RandomHorizontalFlip()] if check_flag("hflip", hflip) else []),
            *_to_normalised_tensor(mean, std),
        ]
    )


def test_transform(
    resize_size: int,
    crop_size: int,
    *,
    mean: tuple[float, ...] = IMAGENET_MEAN,
    std: tuple[float, ...] = IMAGENET_STD,
    interpolation: str = "bilinear",
) -> v2.Compose:
    """Resize the shorter side to ``resize_size``, centre-crop ``crop_size``, normalise (deterministic).

    Example:
        >>> from PIL import Image
        >>> out = test_transform(36, 32)(Image.new("RGB", (60, 40)))
        >>> out.shape
        torch.Size([3, 32, 32])
    """
    if _size(crop_size, "crop_size") > _size(resize_size, "resize_size"):
        raise ValueError(f"`crop_size` ({crop_size}) must not exceed `resize_size` ({resize_size}).")
    return v2.Compose(
        [
            v2.ToImage(),
            v2.Resize(resize_size, interpolation=_interpolation(interpolation), antialias=True),
            v2.CenterCrop(crop_size),
            *_to_normalised_tensor(mean, std),
        ]
    )


test_transform.__test__ = False  # type: ignore[attr-defined]  # a transform, not a pytest test


class _LimitLongerSide(nn.Module):
    """Downscale (bilinear, antialiased) so the longer side is at most ``max_size``; smaller images are kept."""

    def __init__(self, max_size: int) -> None:
        super().__init__()
        self.max_size = max_size

    def forward(self, image: Tensor) -> Tensor:
        height, width = image.shape[-2:]
        scale = self.max_size / max(height, width)
        if scale >= 1:
            return image
        size = [max(1, round(height * scale)), max(1, round(width * scale))]
        return v2.functional.resize(image, size, antialias=True)


def full_size_transform(
    max_size: int | None = 1024, *, mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD
) -> v2.Compose:
    """The test images as they are (aspect ratio kept, no crop), downscaled to a longer side of ``max_size`` at most.

    Example:
        >>> from PIL import Image
        >>> full_size_transform(32)(Image.new("RGB", (64, 40))).shape
        torch.Size([3, 20, 32])
        >>> full_size_transform(None)(Image.new("RGB", (64, 40))).shape
        torch.Size([3, 40, 64])
    """
    resize = [] if max_size is None else [_LimitLongerSide(_size(max_size, "max_size"))]
    return v2.Compose([v2.ToImage(), *resize, *_to_normalised_tensor(tuple(mean), tuple(std))])


def timm_data_config(model: str | nn.Module) -> dict[str, Any]:
    """timm's data configuration (``input_size``, ``mean``, ``std``, ``crop_pct``, ``interpolation``) of a model.

    Args:
        model: a timm model, or a timm model name (``"resnet50"``, ``"deit_small_patch16_224"``, with optional
            ``.tag``); a name is resolved from timm's registry without building the model or downloading weights.

    Example:
        >>> timm_data_config("resnet50")["input_size"]
        (3, 224, 224)
    """
    from timm import get_pretrained_cfg
    from timm.data import resolve_data_config, resolve_model_data_config

    if isinstance(model, nn.Module):
        return resolve_model_data_config(model)
    if not isinstance(model, str):
        raise TypeError(f"`model` must be a timm model or model name, got {type(model).__name__}.")
    pretrained_cfg = get_pretrained_cfg(model)
    if pretrained_cfg is None:
        raise ValueError(f"`model`: timm knows no model called {model!r}; see `timm.list_models()`.")
    return resolve_data_config(pretrained_cfg=pretrained_cfg.to_dict())


def transforms_from_timm(
    model: str | nn.Module,
    *,
    image_size: int | None = None,
    scale: tuple[float, float] = (0.16, 1.0),
    ratio: tuple[float, float] = (3 / 4, 4 / 3),
) -> tuple[v2.Compose, v2.Compose]:
    """Training and test transforms whose mean, std, size, crop fraction and interpolation follow the timm model.

    Args:
        model: a timm model or model name (see :func:`timm_data_config`).
        image_size: crop side overriding the model's input size; the test resize keeps timm's ``crop_pct``.
        scale: RandomResizedCrop area range.
        ratio: RandomResizedCrop aspect-ratio range.

    Returns:
        ``(train, test)``: ``train_transform(size)`` and ``test_transform(round(size / crop_pct), size)``.

    Example:
        >>> train, test = transforms_from_timm("resnet50")
        >>> test(torch.zeros(3, 300, 300, dtype=torch.uint8)).shape
        torch.Size([3, 224, 224])
    """
    config = timm_data_config(model)
    size = config["input_size"][-1] if image_size is None else _size(image_size, "image_size")
    style = {"mean": tuple(config["mean"]), "std": tuple(config["std"]), "interpolation": config["interpolation"]}
    train = train_transform(size, scale=scale, ratio=ratio, **style)
    test = test_transform(round(size / config.get("crop_pct", 1.0)), size, **style)
    return train, test
