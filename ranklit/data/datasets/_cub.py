"""CUB-200-2011 (Wah et al., 2011) in its official layout: 200 bird species, classes 1–100 train, 101–200 test."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ranklit.data.datasets.base import IMAGE_EXTENSIONS, ImageRetrievalDataset

__all__ = ["CUB200"]


class CUB200(ImageRetrievalDataset):
    """CUB-200-2011 for deep metric learning: the first 100 species train, the last 100 test (class-disjoint).

    Reads ``images/<NNN.Species_name>/*.jpg``; ``NNN`` (1–200) is the class id. ``root`` is the unpacked
    ``CUB_200_2011`` folder (or its parent). Labels are ``[N]``, relabelled to ``0..99`` in class-id order.

    Args:
        root: dataset folder.
        split: ``"train"`` (classes 1–100) or ``"test"`` (classes 101–200).
        transform: applied to the PIL image.

    Example:
        >>> CUB200("/nonexistent")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        FileNotFoundError: CUB200: dataset folder /nonexistent does not exist. Expected layout ...
    """

    SPLITS = ("train", "test")
    LAYOUT = "images/<NNN.Species_name>/*.jpg with NNN from 001 to 200 (the unpacked CUB_200_2011 folder)"
    SOURCE = "https://www.vision.caltech.edu/datasets/cub_200_2011/ (CUB_200_2011.tgz)"

    def __init__(self, root: str | Path, split: str = "train", transform: Callable[[Any], Any] | None = None) -> None:
        super().__init__(root, split, transform)
        if not (self.root / "images").is_dir() and (self.root / "CUB_200_2011" / "images").is_dir():
            self.root = self.root / "CUB_200_2011"
        images = self.required_path("images", folder=True)
        paths, rows = [], []
        for folder in sorted(p for p in images.iterdir() if p.is_dir()):
            number = folder.name.split(".", 1)[0]
            if not number.isdigit() or "." not in folder.name:
                raise ValueError(self._layout_message(f"class folder {folder} is not named <NNN.Species_name>"))
            if (int(number) <= 100) != (split == "train"):
                continue
            files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_EXTENSIONS)
            paths += files
            rows += [(int(number),)] * len(files)
        self.set_samples(paths, rows)
