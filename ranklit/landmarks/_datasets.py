"""Revisited Oxford 5k and Paris 6k (Radenović et al., CVPR 2018): 70 cropped queries, easy/hard/junk ground truth."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from PIL import Image
from torch import Tensor

from ranklit.data.datasets.base import ImageRetrievalDataset, load_image
from ranklit.landmarks._protocols import PROTOCOLS
from ranklit.landmarks.ground_truth import load_ground_truth

__all__ = ["RevisitedLandmarks"]


class RevisitedLandmarks(ImageRetrievalDataset):
    """ROxford5k / RParis6k for evaluation: ``split="query"`` (70 images cropped to their boxes) or ``"gallery"``.

    Reads ``gnd_<name>.pkl`` (a dict with ``imlist``, ``qimlist`` and ``gnd``, one entry per query with ``bbx`` and
    the ``easy`` / ``hard`` / ``junk`` index lists into ``imlist``) and the images ``jpg/<image>.jpg``. The pickle is
    read by a restricted unpickler (builtin containers and numpy arrays only,
    :mod:`ranklit.landmarks.ground_truth`): a file that would run code is refused with a ``ValueError``.

    There are no class labels: ``labels`` holds the query number for queries and ``-1`` for gallery images, so no
    pair matches by label. Relevance comes from the ground truth: ``gnd`` (the raw lists) or :meth:`ground_truth`
    for one of the protocols ``easy`` (positives: easy; junk: junk + hard), ``medium`` (easy + hard; junk) and
    ``hard`` (hard; junk + easy). Junk images are removed from the query's ranking.

    Args:
        root: the folder holding ``gnd_<name>.pkl`` and ``jpg/``.
        split: ``"query"`` or ``"gallery"``.
        transform: applied to the PIL image (after the query crop).
        name: ``"roxford5k"`` or ``"rparis6k"``.

    Example:
        >>> import pathlib, tempfile
        >>> RevisitedLandmarks(pathlib.Path(tempfile.mkdtemp()), "gallery", name="rparis6k")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        FileNotFoundError: RevisitedLandmarks: file .../gnd_rparis6k.pkl not found. Expected layout ...
    """

    SPLITS = ("query", "gallery")
    LAYOUT = "gnd_roxford5k.pkl or gnd_rparis6k.pkl (keys imlist, qimlist, gnd) and jpg/<image>.jpg"
    SOURCE = "http://cmp.felk.cvut.cz/revisitop/ (ground truth and images)"

    def __init__(
        self,
        root: str | Path,
        split: str = "query",
        transform: Callable[[Any], Any] | None = None,
        *,
        name: str = "roxford5k",
    ) -> None:
        super().__init__(root, split, transform)
        if name not in ("roxford5k", "rparis6k"):
            raise ValueError(f"RevisitedLandmarks: `name` must be 'roxford5k' or 'rparis6k', got {name!r}.")
        self.name = name
        path = self.required_path(f"gnd_{name}.pkl")
        try:
            data = load_ground_truth(path)  # a restricted unpickler: a crafted file cannot run code
            imlist, qimlist = [str(i) for i in data["imlist"]], [str(q) for q in data["qimlist"]]
            self.gnd: list[dict[str, list[int]]] = [
                {key: [int(i) for i in entry.get(key, [])] for key in ("easy", "hard", "junk")} for entry in data["gnd"]
            ]
            self.boxes = [tuple(float(v) for v in entry["bbx"]) for entry in data["gnd"]]
        except (pickle.UnpicklingError, EOFError, KeyError, TypeError, ValueError, AttributeError) as error:
            raise ValueError(
                self._layout_message(f"{path} is not a revisited-landmarks ground truth: {error!r}")
            ) from error
        if len(self.gnd) != len(qimlist):
            raise ValueError(self._layout_message(f"{path}: {len(qimlist)} queries but {len(self.gnd)} gnd entries"))
        self.num_gallery = len(imlist)
        names = qimlist if split == "query" else imlist
        self.set_samples([self.root / "jpg" / f"{n}.jpg" for n in names], [(i,) for i in range(len(names))])
        self.labels = torch.arange(len(names)) if split == "query" else torch.full((len(names),), -1)
        self.class_names = [list(names)] if split == "query" else [[]]
        self.num_classes = len(self.class_names[0])

    def read_image(self, index: int) -> Image.Image:
        image = load_image(self.paths[index])
        if self.split != "query":
            return image
        left, upper, right, lower = self.boxes[index]
        return image.crop((left, upper, right, lower))

    def ground_truth(self, protocol: str = "medium") -> tuple[Tensor, Tensor]:
        """Relevance masks ``(positive, junk)``, both ``[70, num_gallery]`` bool, for ``easy``/``medium``/``hard``.

        A query without positives under a protocol (possible for ``hard``) has an all-false row; metrics count it
        among the queries without positive.
        """
        if protocol not in PROTOCOLS:
            raise ValueError(f"`protocol` must be one of {tuple(PROTOCOLS)}, got {protocol!r}.")
        positive = torch.zeros(len(self.gnd), self.num_gallery, dtype=torch.bool)
        junk = torch.zeros_like(positive)
        for q, entry in enumerate(self.gnd):
            for mask, keys in zip((positive, junk), PROTOCOLS[protocol], strict=True):
                for key in keys:
                    mask[q, entry[key]] = True
        return positive, junk
