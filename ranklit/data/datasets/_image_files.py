"""Unlabelled images to embed (a search index's gallery): every image under a folder, or the paths of a CSV file."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ranklit.data.datasets.base import IMAGE_EXTENSIONS, ImageRetrievalDataset
from ranklit.data.datasets.validation import Problems

__all__ = ["ImageFiles"]


class ImageFiles(ImageRetrievalDataset):
    """Every image file under ``root`` at any depth (sorted by path), or the images of the ``path`` column of a CSV.

    No class structure is needed: the images are what a search index holds (``ranklit index --images DIR|CSV``).
    Every label is 0. Hidden files and files without an image extension (``IMAGE_EXTENSIONS``) are skipped; missing,
    empty and twice-listed files of a CSV are reported together
    (:class:`~ranklit.data.datasets.validation.DatasetError`).

    Args:
        root: the folder of images, or the folder the CSV's paths are relative to.
        split: not used (any value is kept as ``split``).
        transform: applied to the PIL image.
        csv_file: a CSV file with a header holding a ``path`` column (other columns are ignored); relative to
            ``root`` or absolute. ``None``: read the folder.

    Example:
        >>> import tempfile, pathlib
        >>> from PIL import Image
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> for name in ("b.png", "sub/a.jpg", "notes.txt"):
        ...     (root / name).parent.mkdir(parents=True, exist_ok=True)
        ...     Image.new("RGB", (4, 4)).save(root / name, format="PNG")
        >>> [str(p.relative_to(root)) for p in ImageFiles(root).paths]
        ['b.png', 'sub/a.jpg']
    """

    LAYOUT = "image files at any depth under root, or a CSV file with a `path` column (paths relative to root)"
    SOURCE = "your own images"

    def __init__(
        self,
        root: str | Path,
        split: str | None = None,
        transform: Callable[[Any], Any] | None = None,
        *,
        csv_file: str | Path | None = None,
    ) -> None:
        super().__init__(root, split, transform)
        problems = Problems(type(self).__name__, self.root if csv_file is None else csv_file)
        if csv_file is None:
            paths = sorted(
                f
                for f in self.root.rglob("*")
                if f.is_file()
                and f.suffix.lower() in IMAGE_EXTENSIONS
                and not any(part.startswith(".") for part in f.relative_to(self.root).parts)
            )
            self.set_samples(paths, [(0,)] * len(paths), problems=problems)
            return
        table = Path(csv_file) if Path(csv_file).is_absolute() else self.required_path(str(csv_file))
        with table.open(newline="") as handle:
            rows = [row for row in csv.reader(handle) if row]
        header = [name.strip() for name in rows[0]] if rows else []
        if "path" not in header:
            raise self.malformed_line(table, 1, ",".join(header), "a header with a `path` column")
        column = header.index("path")
        listed = [(number, row[column].strip()) for number, row in enumerate(rows[1:], start=2) if len(row) > column]
        paths = [self.root / name for _, name in listed]
        shown = [f"line {number} ({name})" for number, name in listed]
        self.set_samples(paths, [(0,)] * len(paths), problems=problems, shown_as=shown)
