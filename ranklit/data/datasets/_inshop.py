"""DeepFashion In-Shop Clothes Retrieval (Liu et al., 2016): train items, and a query / gallery test protocol."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ranklit.data.datasets.base import ImageRetrievalDataset

__all__ = ["InShop"]

_HEADER = ["image_name", "item_id", "evaluation_status"]


class InShop(ImageRetrievalDataset):
    """In-Shop: 3,997 train items (25,882 images); 3,985 test items as 14,218 queries and 12,612 gallery images.

    Reads ``list_eval_partition.txt`` (in ``root`` or ``root/Eval``; first line the image count, second the
    header ``image_name item_id evaluation_status``, then ``img/<GENDER>/<Category>/<item>/<file>.jpg <item>
    <train|query|gallery>``) and the images under ``root`` or ``root/Img``. Labels are ``[item, category]`` where
    the category is ``<GENDER>/<Category>`` (e.g. ``WOMEN/Dresses``, 23 of them). Query and gallery are relabelled
    together, so their ids match.

    Args:
        root: the In-Shop folder.
        split: ``"train"``, ``"query"`` or ``"gallery"``.
        transform: applied to the PIL image.

    Example:
        >>> import pathlib, tempfile
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> InShop(root, "query")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        FileNotFoundError: InShop: file .../list_eval_partition.txt not found. Expected layout ...
    """

    SPLITS = ("train", "query", "gallery")
    LAYOUT = (
        "list_eval_partition.txt (or Eval/list_eval_partition.txt: an image count, the header `image_name item_id "
        "evaluation_status`, then one `img/<GENDER>/<Category>/<item>/<file>.jpg <item> <split>` per line) and the "
        "img/ folder (or Img/img/)"
    )
    SOURCE = "https://mmlab.ie.cuhk.edu.hk/projects/DeepFashion/InShopRetrieval.html"

    def __init__(self, root: str | Path, split: str = "train", transform: Callable[[Any], Any] | None = None) -> None:
        super().__init__(root, split, transform)
        nested = not (self.root / "list_eval_partition.txt").is_file() and (self.root / "Eval").is_dir()
        listing = self.required_path(*(["Eval"] if nested else []), "list_eval_partition.txt")
        images = self.root / "Img" if not (self.root / "img").is_dir() and (self.root / "Img").is_dir() else self.root
        lines = listing.read_text().splitlines()
        if len(lines) < 2 or lines[1].split() != _HEADER:
            found = lines[1] if len(lines) > 1 else ""
            raise self.malformed_line(listing, 2, found, "the header `" + " ".join(_HEADER) + "`")
        pool = ("train",) if split == "train" else ("query", "gallery")
        paths: list[Path] = []
        rows, keep = [], []
        for number, line in enumerate(lines[2:], start=3):
            fields = line.split()
            if not fields:
                continue
            parts = Path(fields[0]).parts
            if len(fields) != 3 or fields[2] not in self.SPLITS or len(parts) < 4:
                expected = "`img/<GENDER>/<Category>/<item>/<file> <item> <split>`"
                raise self.malformed_line(listing, number, line, expected)
            if fields[2] in pool:
                keep += [len(paths)] if fields[2] == split else []
                paths.append(images / fields[0])
                rows.append((fields[1], f"{parts[-4]}/{parts[-3]}"))
        self.set_samples(paths, rows, keep)
