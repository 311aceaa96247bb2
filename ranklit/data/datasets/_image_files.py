"""Unlabelled images to embed (a search index's gallery): every image under a folder, or the paths of a CSV file."""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ranklit.data.datasets._inside_root import outside_root
from ranklit.data.datasets.base import IMAGE_EXTENSIONS, ImageRetrievalDataset
from ranklit.data.datasets.validation import DatasetError, Problems
from ranklit.data.images._unreadable import NO_SKIP

__all__ = ["ALL_ROWS", "ImageFiles"]

ALL_ROWS = "all"
"""The ``split`` that keeps every row of a CSV, whatever its ``split`` column says."""


class ImageFiles(ImageRetrievalDataset):
    """Every image file under ``root`` at any depth (sorted by path), or the images of the ``path`` column of a CSV.

    No class structure is needed: the images are what a search index holds (``ranklit index --images DIR|CSV``).
    Every label is 0. Hidden files and files without an image extension (``IMAGE_EXTENSIONS``) are skipped; missing,
    empty and twice-listed files of a CSV, and paths leading outside ``root`` (``..`` above it, an absolute path
    elsewhere; as :class:`~ranklit.data.CSVDataset` refuses them), are reported together
    (:class:`~ranklit.data.datasets.validation.DatasetError`).

    **Splits.** A CSV with a ``split`` column (as :class:`~ranklit.data.CSVDataset` reads it) lists training and
    evaluation images together, so which rows to embed is asked, never guessed: ``split="test"`` keeps the rows marked
    ``test``, ``split="all"`` (:data:`ALL_ROWS`) every row, and ``split=None`` (the default) is refused with the
    splits present. Without a ``split`` column (or for a folder) ``None`` and ``"all"`` keep every image and another
    value is refused.

    Args:
        root: the folder of images, or the folder the CSV's paths are relative to.
        split: the value of the CSV's ``split`` column to keep, ``"all"``, or ``None`` (see above).
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
    on_bad_image = NO_SKIP  # an index's or a search's images: no `data.on_bad_image` to advise

    def __init__(
        self,
        root: str | Path,
        split: str | None = None,
        transform: Callable[[Any], Any] | None = None,
        *,
        csv_file: str | Path | None = None,
    ) -> None:
        super().__init__(root, None, transform)  # unlabelled: no evaluation split's class checks
        problems = Problems(type(self).__name__, self.root if csv_file is None else csv_file)
        if csv_file is None:
            if split not in (None, ALL_ROWS):
                raise DatasetError(f"{self.root} is a folder of images, which has no splits (split {split!r} given): "
                                   "list the images of that split in a CSV file, or leave the split out.")
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
        records = [(number, row) for number, row in enumerate(rows[1:], start=2) if len(row) > column]
        records = self._rows_of_split(table, header, records, split)
        listed = [(number, row[column].strip()) for number, row in records]
        problems.add(
            f"rows whose path leads outside {self.root}",
            [f"line {listed[i][0]} ({listed[i][1]})" for i in outside_root(self.root, [name for _, name in listed])],
            "Give paths relative to the CSV's folder that stay inside it (no `..` above it, no absolute path "
            "elsewhere); a symbolic link inside it may point anywhere",
        )
        paths = [self.root / name for _, name in listed]
        shown = [f"line {number} ({name})" for number, name in listed]
        self.set_samples(paths, [(0,)] * len(paths), problems=problems, shown_as=shown)
        self.split = split

    @staticmethod
    def _rows_of_split(
        table: Path, header: list[str], records: list[tuple[int, list[str]]], split: str | None
    ) -> list[tuple[int, list[str]]]:
        """The rows of ``split`` (class docstring: ``None`` is refused when the CSV has a ``split`` column)."""
        if "split" not in header:
            if split not in (None, ALL_ROWS):
                raise DatasetError(f"{table} has no `split` column (its header: {','.join(header)}), so no rows "
                                   f"of split {split!r}: leave the split out to embed every row.")
            return records
        column = header.index("split")
        values = Counter(row[column].strip() if len(row) > column else "" for _, row in records)
        present = ", ".join(f"{value!r} x{count}" for value, count in sorted(values.items()))
        if split is None:
            raise DatasetError(
                f"{table} has a `split` column ({present}): say which rows to embed, e.g. `--split test` "
                "(Python: `split=\"test\"`), or `--split all` for every row."
            )
        if split == ALL_ROWS:
            return records
        kept = [(number, row) for number, row in records if len(row) > column and row[column].strip() == split]
        if not kept:
            raise DatasetError(f"{table} has no row of split {split!r} (splits present: {present}): give one of "
                               "those, or `all` for every row.")
        return kept
