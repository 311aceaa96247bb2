"""Stanford Online Products (Oh Song et al., 2016): 22,634 products of 12 super-classes, official split."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ranklit.data.datasets.base import ImageRetrievalDataset

__all__ = ["StanfordOnlineProducts"]

_HEADER = ["image_id", "class_id", "super_class_id", "path"]


class StanfordOnlineProducts(ImageRetrievalDataset):
    """Stanford Online Products with labels ``[class, super-class]`` (11,318 train / 11,316 test products).

    Reads ``Ebay_train.txt`` / ``Ebay_test.txt`` (header ``image_id class_id super_class_id path``, one image per
    line, paths relative to ``root``). Both columns are relabelled to contiguous ids (super-classes ``0..11``).

    Args:
        root: the ``Stanford_Online_Products`` folder.
        split: ``"train"`` or ``"test"``.
        transform: applied to the PIL image.

    Example:
        >>> import pathlib, tempfile
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> rows = ["image_id class_id super_class_id path", "1 1 1 a/1.JPG", "2 1 1 a/2.JPG", "3 2 5 b/3.JPG"]
        >>> _ = (root / "Ebay_train.txt").write_text("\\n".join(rows))
        >>> for name in ("a/1.JPG", "a/2.JPG", "b/3.JPG"):  # the images (here: empty JPEGs, only listed)
        ...     (root / name).parent.mkdir(exist_ok=True); _ = (root / name).write_bytes(b"\\xff\\xd8")
        >>> data = StanfordOnlineProducts(root, "train")
        >>> data.labels.tolist(), data.class_names, data.num_classes
        ([[0, 0], [0, 0], [1, 1]], [[1, 2], [1, 5]], 2)
    """

    SPLITS = ("train", "test")
    LAYOUT = (
        "Ebay_train.txt and Ebay_test.txt (header `image_id class_id super_class_id path`) and the image folders "
        "they list (bicycle_final/, ...)"
    )
    SOURCE = "https://cvgl.stanford.edu/projects/lifted_struct/ (Stanford_Online_Products.zip)"

    def __init__(self, root: str | Path, split: str = "train", transform: Callable[[Any], Any] | None = None) -> None:
        super().__init__(root, split, transform)
        listing = self.required_path(f"Ebay_{split}.txt")
        lines = listing.read_text().splitlines()
        if not lines or lines[0].split() != _HEADER:
            raise self.malformed_line(listing, 1, lines[0] if lines else "", "the header `" + " ".join(_HEADER) + "`")
        paths, rows = [], []
        for number, line in enumerate(lines[1:], start=2):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 4 or not all(f.isdigit() for f in fields[:3]):
                raise self.malformed_line(listing, number, line, "`<image_id> <class_id> <super_class_id> <path>`")
            paths.append(self.root / fields[3])
            rows.append((int(fields[1]), int(fields[2])))
        self.set_samples(paths, rows)
