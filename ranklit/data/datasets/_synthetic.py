"""``SyntheticHierarchy``: procedurally generated images with a 2- or 3-level label hierarchy, built in memory.

The built-in dataset of the quick start: nothing is downloaded and nothing touches the disk. Each image shows one
shape on a cluttered background:

- the **coarse** label is the shape (circle, square, triangle, ring, cross, diamond, ...);
- with ``levels=3`` the **middle** label is the texture (solid, stripes, checker, dots) of a given shape, and the
  **fine** label the colour;
  with ``levels=2`` the fine label is a (texture, colour) pair.

Every image draws its own position, size, rotation, colour jitter, background colour, noise and two distractor
blobs, so colour statistics alone do not separate the classes and an untrained network scores low. Train and test
fine classes are disjoint (half of the fine classes of every parent each), as in the deep-metric-learning benchmarks,
while coarse classes are shared, as in Stanford Online Products. Everything is deterministic given ``seed``.
"""

from __future__ import annotations

import colorsys
import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ranklit.data.datasets.base import RetrievalDataset, retrieval_item

__all__ = ["SyntheticHierarchy"]

_SHAPES = ("circle", "square", "triangle", "ring", "cross", "diamond", "bar", "half")
_TEXTURES = ("solid", "stripes", "checker", "dots")


def _shape_mask(shape: str, u: Tensor, v: Tensor) -> Tensor:
    r = torch.sqrt(u**2 + v**2)
    masks = {
        "circle": r <= 1.0,
        "square": torch.maximum(u.abs(), v.abs()) <= 0.8,
        "triangle": (v >= -0.7) & (1.0 - v >= 1.2 * u.abs()),
        "ring": (r <= 1.0) & (r >= 0.55),
        "cross": ((u.abs() <= 0.3) & (v.abs() <= 1.0)) | ((v.abs() <= 0.3) & (u.abs() <= 1.0)),
        "diamond": u.abs() + v.abs() <= 1.0,
        "bar": (u.abs() <= 1.0) & (v.abs() <= 0.35),
        "half": (r <= 1.0) & (v >= 0.0),
    }
    return masks[shape]


def _texture(texture: str, u: Tensor, v: Tensor, phase: float) -> Tensor:
    patterns = {
        "solid": torch.ones_like(u),
        "stripes": 0.55 + 0.45 * (torch.sin(7.0 * u + phase) > 0).float(),
        "checker": 0.55 + 0.45 * ((torch.sin(5.0 * u + phase) * torch.sin(5.0 * v + phase)) > 0).float(),
        "dots": 1.0 - 0.45 * ((torch.sin(6.0 * u + phase) ** 2 + torch.sin(6.0 * v + phase) ** 2) < 0.5).float(),
    }
    return patterns[texture]


def _rgb(hue: float, saturation: float = 0.85, value: float = 0.9) -> Tensor:
    return torch.tensor(colorsys.hsv_to_rgb(hue % 1.0, saturation, value))


class SyntheticHierarchy(RetrievalDataset):
    """Procedural shapes with a label hierarchy (column 0 finest), class-disjoint train/test splits.

    Args:
        root: ignored (kept so every dataset has the same constructor).
        split: ``train`` or ``test``.
        transform: applied to the ``uint8`` image tensor ``[3, S, S]``
            (e.g. :func:`ranklit.data.images.transforms.train_transform`).
        levels: 2 (``[fine, shape]``) or 3 (``[colour, (shape, texture), shape]``).
        num_coarse: number of shapes (at most 8).
        fine_per_parent: fine classes per parent (coarse for 2 levels, texture for 3); half go to each split.
        images_per_class: images generated per fine class.
        image_size: side of the square images.
        seed: everything is deterministic given the seed.

    Example:
        >>> data = SyntheticHierarchy(split="test", num_coarse=2, fine_per_parent=4, images_per_class=3, image_size=16)
        >>> len(data), data.labels.shape, data.num_classes
        (12, torch.Size([12, 2]), 4)
        >>> item = data[0]
        >>> item["image"].shape, item["image"].dtype, item["index"]
        (torch.Size([3, 16, 16]), torch.uint8, 0)
    """

    def __init__(
        self,
        root: str | None = None,
        split: str = "train",
        transform: Callable[[Tensor], Tensor] | None = None,
        *,
        levels: int = 2,
        num_coarse: int = 4,
        fine_per_parent: int = 8,
        images_per_class: int = 24,
        image_size: int = 48,
        seed: int = 0,
    ) -> None:
        if split not in ("train", "test"):
            raise ValueError(f"`split` must be 'train' or 'test' for SyntheticHierarchy, got {split!r}.")
        if levels not in (2, 3):
            raise ValueError(f"`levels` must be 2 or 3, got {levels}.")
        if not 1 <= num_coarse <= len(_SHAPES):
            raise ValueError(f"`num_coarse` must be in 1..{len(_SHAPES)}, got {num_coarse}.")
        if fine_per_parent < 2 or fine_per_parent % 2:
            raise ValueError(f"`fine_per_parent` must be an even number >= 2 (half per split), got {fine_per_parent}.")
        if images_per_class < 1 or image_size < 8:
            raise ValueError("`images_per_class` must be >= 1 and `image_size` >= 8.")
        self.root, self.split, self.transform = root, split, transform
        self.image_size = image_size
        classes = self._classes(levels, num_coarse, fine_per_parent, seed)
        offset = 0 if split == "train" else 1
        chosen = [c for c in classes if c["rank_in_parent"] % 2 == offset]
        generator = torch.Generator().manual_seed(seed * 7919 + offset)
        images, rows = [], []
        for c in chosen:
            for _ in range(images_per_class):
                images.append(self._render(c, generator))
                rows.append(c["labels"])
        self.images = torch.stack(images)
        raw = torch.tensor(rows)
        self.labels = torch.stack([torch.unique(col, return_inverse=True)[1] for col in raw.T], dim=1)
        self.num_classes = int(self.labels[:, 0].max()) + 1

    @staticmethod
    def _classes(levels: int, num_coarse: int, fine_per_parent: int, seed: int) -> list[dict]:
        generator = torch.Generator().manual_seed(seed)
        classes: list[dict[str, Any]] = []
        for coarse in range(num_coarse):
            textures = range(len(_TEXTURES)) if levels == 3 else [None]
            for texture in textures:
                hue0 = float(torch.rand(1, generator=generator))
                for rank in range(fine_per_parent):
                    fine = len(classes)
                    if texture is not None:
                        tex = texture
                    else:
                        tex = int(torch.randint(len(_TEXTURES), (1,), generator=generator))
                    hue = hue0 + rank / fine_per_parent
                    labels = [fine, coarse * len(_TEXTURES) + tex, coarse] if levels == 3 else [fine, coarse]
                    classes.append({"shape": _SHAPES[coarse], "texture": _TEXTURES[tex], "hue": hue,
                                    "labels": labels, "rank_in_parent": rank})
        return classes

    def _render(self, cls: dict[str, Any], g: torch.Generator) -> Tensor:
        size = self.image_size

        def rand(*shape: int) -> Tensor:
            return torch.rand(*shape, generator=g)

        axis = torch.linspace(-1.0, 1.0, size)
        y, x = torch.meshgrid(axis, axis, indexing="ij")
        background = _rgb(float(rand(1)), saturation=0.4 * float(rand(1)), value=0.3 + 0.5 * float(rand(1)))
        shade = 0.8 + 0.2 * rand(1, size, size)  # drawn before the noise: the generator's order is the dataset
        image = background[:, None, None] * shade + 0.06 * torch.randn(3, size, size, generator=g)
        for _ in range(2):  # distractor blobs of random colour
            cx, cy, radius = rand(1) * 2 - 1, rand(1) * 2 - 1, 0.15 + 0.2 * rand(1)
            blob = ((x - cx) ** 2 + (y - cy) ** 2) <= radius**2
            image = torch.where(blob, _rgb(float(rand(1)))[:, None, None], image)
        angle = float(rand(1)) * 2 * math.pi
        scale = 0.35 + 0.2 * float(rand(1))
        ox, oy = (float(rand(1)) - 0.5) * 0.6, (float(rand(1)) - 0.5) * 0.6
        u = ((x - ox) * math.cos(angle) + (y - oy) * math.sin(angle)) / scale
        v = (-(x - ox) * math.sin(angle) + (y - oy) * math.cos(angle)) / scale
        mask = _shape_mask(cls["shape"], u, v)
        hue = cls["hue"] + 0.04 * (float(rand(1)) - 0.5)
        colour = _rgb(hue, value=0.7 + 0.3 * float(rand(1)))[:, None, None]
        shaded = colour * _texture(cls["texture"], u, v, phase=float(rand(1)) * 2 * math.pi)
        image = torch.where(mask, shaded, image)
        return (image.clamp(0, 1) * 255).round().to(torch.uint8)

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def __getitem__(self, index: int) -> dict:
        return retrieval_item(self.images[int(index)], self.labels[int(index)], index, self.transform)
