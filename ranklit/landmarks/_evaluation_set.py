"""Revisited Oxford and Paris as one test set: every query (cropped) and gallery image, at full size.

The set the landmark papers evaluate (Revaud et al. ICCV 2019 §4.1-4.3, Radenović et al. CVPR 2018): for each
benchmark its 70 queries cropped to their ``bbx`` and its gallery, fed at their original size (downscaled only when
the longer side exceeds ``max_size``), optionally followed by the images a whitening is learnt from. One
``ranklit test`` embeds them all and :class:`ranklit.metrics.RevisitedMetrics` scores each benchmark.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ranklit.data.datasets.base import RetrievalDataset
from ranklit.data.images.transforms import full_size_transform
from ranklit.landmarks._datasets import RevisitedLandmarks

__all__ = ["RevisitedBenchmark", "RevisitedTestSet"]


@dataclass(frozen=True)
class RevisitedBenchmark:
    """One benchmark inside a :class:`RevisitedTestSet`: item positions of its queries and gallery, and its lists.

    ``gnd[q]`` holds the ``easy`` / ``hard`` / ``junk`` lists of query ``q`` as positions in ``gallery``.
    """

    name: str
    queries: range
    gallery: range
    gnd: list[dict[str, list[int]]]


class RevisitedTestSet(RetrievalDataset):
    """ROxford5k and RParis6k (queries cropped to their boxes, galleries) in one set, at full size.

    Layout under ``root`` (revisitop's download layout)::

        <name>/gnd_<name>.pkl      for each name: imlist, qimlist, gnd (read safely, see RevisitedLandmarks)
        <name>/jpg/<image>.jpg

    Items are ``{"image", "label": -1, "index"}`` in the order: for each name its queries then its gallery, then the
    ``whitening_dataset`` images (if any). :attr:`benchmarks` says where each part is. Full-size images differ in
    size: evaluate with ``data.eval_batch_size: 1``.

    Args:
        root: the folder holding one sub-folder per benchmark.
        names: the benchmarks, among ``roxford5k`` and ``rparis6k``.
        transform: applied to every image (default :func:`ranklit.data.images.transforms.full_size_transform` of
            ``max_size``; the datamodule's resize-and-crop evaluation transform is not used).
        max_size: longer side of the test images (downscaled when larger, never upscaled); ``None``: as stored.
        whitening_dataset: images embedded with the test set to learn a whitening from
            (:class:`ranklit.landmarks.postprocess.LearntWhitening` without ``descriptors``), e.g. a
            :class:`ranklit.data.CSVDataset` of training landmarks (give its own ``root``); its transform is
            replaced by this set's.

    Attributes:
        benchmarks: one :class:`RevisitedBenchmark` per name.
        whitening_rows: item positions of the ``whitening_dataset`` images (``None`` without one).
    """

    def __init__(
        self,
        root: str | Path,
        names: Sequence[str] = ("roxford5k", "rparis6k"),
        transform: Callable[[Any], Any] | None = None,
        *,
        max_size: int | None = 1024,
        whitening_dataset: RetrievalDataset | None = None,
    ) -> None:
        if isinstance(names, str) or not names or len(set(names)) != len(names):
            raise ValueError(f"`names` must list distinct benchmarks (roxford5k, rparis6k), got {names!r}.")
        self.root = Path(root).expanduser()
        self.transform = full_size_transform(max_size) if transform is None else transform
        self._parts: list[RetrievalDataset] = []
        self._starts: list[int] = []
        self.benchmarks: list[RevisitedBenchmark] = []
        for name in names:
            query, gallery = (RevisitedLandmarks(self.root / name, split, name=name) for split in ("query", "gallery"))
            queries, gallery_rows = self._add(query), self._add(gallery)
            self.benchmarks.append(RevisitedBenchmark(name, queries, gallery_rows, query.gnd))
        self.whitening_rows = None if whitening_dataset is None else self._add(whitening_dataset)
        self.labels = torch.full((self._starts[-1] + len(self._parts[-1]),), -1, dtype=torch.long)  # type: ignore[arg-type]

    def _add(self, dataset: RetrievalDataset) -> range:
        start = self._starts[-1] + len(self._parts[-1]) if self._parts else 0  # type: ignore[arg-type]
        dataset.transform = None  # this set applies its own transform to the raw image
        self._parts.append(dataset)
        self._starts.append(start)
        return range(start, start + len(dataset))  # type: ignore[arg-type]

    def named_parts(self) -> list[tuple[str, RetrievalDataset]]:
        """Each benchmark's ``query`` and ``gallery`` datasets (and the ``whitening`` one), named: what ``ranklit data
        check`` decodes."""
        names = [f"{b.name} {split}" for b in self.benchmarks for split in ("query", "gallery")]
        return list(zip([*names, "whitening"][: len(self._parts)], self._parts, strict=True))

    def __len__(self) -> int:
        return int(self.labels.numel())

    def __getitem__(self, index: int) -> dict[str, Any]:
        part = bisect.bisect_right(self._starts, int(index)) - 1
        image = self._parts[part][int(index) - self._starts[part]]["image"]
        image = self.transform(image) if self.transform is not None else image
        return {"image": image, "label": self.labels[int(index)], "index": int(index)}

    def __repr__(self) -> str:
        names = ", ".join(f"{b.name}: {len(b.queries)} queries, {len(b.gallery)} gallery" for b in self.benchmarks)
        extra = f", whitening images: {len(self.whitening_rows)}" if self.whitening_rows is not None else ""
        return f"RevisitedTestSet(root={str(self.root)!r}, {names}{extra})"
