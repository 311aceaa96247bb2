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
from ranklit.data.datasets.validation import OUTSIDE_FIX, Problems, outside_root
from ranklit.errors import UserError
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
        self.ground_truth_file, self.num_gallery = path, len(imlist)
        names = qimlist if split == "query" else imlist
        self._check_ground_truth(names)
        self.set_samples([self.root / "jpg" / f"{n}.jpg" for n in names], [(i,) for i in range(len(names))])
        self.labels = torch.arange(len(names)) if split == "query" else torch.full((len(names),), -1)
        self.class_names = [list(names)] if split == "query" else [[]]
        self.num_classes = len(self.class_names[0])

    def _check_ground_truth(self, names: list[str]) -> None:
        """Refuse image names that lead outside ``root`` (:mod:`ranklit.data.datasets._inside_root`), indices outside
        ``imlist`` and query boxes that are not ``[x1, y1, x2, y2]`` with ``0 <= x1 < x2``, ``0 <= y1 < y2``."""
        problems = Problems(type(self).__name__, self.ground_truth_file)
        escaped = outside_root(self.root, [f"jpg/{name}.jpg" for name in names])
        problems.add(f"image names that lead outside {self.root}", [names[i] for i in escaped], OUTSIDE_FIX)
        outside = [f"query {q} {key} {i}" for q, e in enumerate(self.gnd) for key in e for i in e[key]
                   if not 0 <= i < self.num_gallery]
        problems.add(f"indices outside imlist (0..{self.num_gallery - 1})", outside, "Fix or re-download the file")
        boxes = [f"query {q} {list(b)}" for q, b in enumerate(self.boxes)
                 if len(b) != 4 or not 0 <= b[0] < b[2] or not 0 <= b[1] < b[3]]
        problems.add("query boxes `bbx` not [x1, y1, x2, y2] with 0 <= x1 < x2, 0 <= y1 < y2", boxes)
        problems.raise_if_any()

    def read_image(self, index: int) -> Image.Image:
        image = load_image(self.paths[index])
        if self.split != "query":
            return image
        left, upper, right, lower = self.boxes[index]
        if right > image.width + 1 or lower > image.height + 1:
            raise UserError(
                f"{self.ground_truth_file}: the box `bbx` {list(self.boxes[index])} of query {index} "
                f"({self.paths[index].name}) lies outside its image of {image.width} x {image.height} pixels; fix the "
                "ground truth or re-download it (revisitop's boxes lie inside their images)."
            )
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
