"""Generic retrieval dataset described by a CSV file: ``path,label[,coarser labels...][,split]``."""

from __future__ import annotations

import csv
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

from ranklit.data.datasets.base import ImageRetrievalDataset, split_pool

__all__ = ["CSVDataset"]


def _typed(column: list[str]) -> list[Hashable]:
    """A label column as ints when every value is an integer, else as the strings themselves."""
    if all(v.strip().lstrip("-").isdigit() for v in column):
        return [int(v) for v in column]
    return list(column)


class CSVDataset(ImageRetrievalDataset):
    """Images and labels listed in a CSV file with a header: ``path``, one or more label columns, optional ``split``.

    The label columns go from the finest to the coarsest (``path,label,super_label,split`` gives ``[N, 2]``
    labels); their values may be integers or strings. Paths are relative to ``root`` (or absolute). With a
    ``split`` column, ``split="train"`` keeps the rows marked ``train``; ``"query"`` and ``"gallery"`` are relabelled
    together so their ids match; ``split=None`` keeps every row. Labels are relabelled to contiguous ids per column
    (the original values are in ``class_names``).

    Args:
        root: folder the image paths are relative to.
        split: value of the ``split`` column to keep, or ``None`` for every row.
        transform: applied to the PIL image.
        csv_file: the CSV file, relative to ``root`` or absolute.

    Example:
        >>> import tempfile, pathlib
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (folder / "data.csv").write_text("path,label,coarse,split\\na.jpg,7,1,train\\nb.jpg,9,1,train\\n")
        >>> data = CSVDataset(folder, "train", csv_file="data.csv")
        >>> data.labels.tolist(), data.class_names
        ([[0, 0], [1, 0]], [[7, 9], [1]])
    """

    SPLITS = ()
    LAYOUT = (
        "a CSV file with the header `path,label[,coarser label columns...][,split]` and one image per row, "
        "paths relative to root"
    )
    SOURCE = "your own data (write the CSV described above)"

    def __init__(
        self,
        root: str | Path,
        split: str | None = None,
        transform: Callable[[Any], Any] | None = None,
        *,
        csv_file: str | Path = "dataset.csv",
    ) -> None:
        super().__init__(root, split, transform)
        path = Path(csv_file) if Path(csv_file).is_absolute() else self._file(str(csv_file))
        if not path.is_file():
            raise FileNotFoundError(self._layout_message(f"file {path} not found"))
        with path.open(newline="") as handle:
            records = [row for row in csv.reader(handle) if row]
        header = [name.strip() for name in records[0]] if records else []
        has_split = bool(header) and header[-1] == "split"
        num_labels = len(header) - 1 - has_split
        if not header or header[0] != "path" or num_labels < 1:
            raise self._malformed(path, 1, ",".join(header), "the header `path,label[,coarser labels...][,split]`")
        for number, row in enumerate(records[1:], start=2):
            if len(row) != len(header) or not all(v.strip() for v in row):
                expected = f"{len(header)} non-empty fields ({','.join(header)})"
                raise self._malformed(path, number, ",".join(row), expected)
        rows = records[1:]
        if split is not None:
            available = sorted({row[-1].strip() for row in rows}) if has_split else []
            if split not in available:
                problem = f"{path} has no rows with split {split!r} (splits present: {available or 'no split column'})"
                raise ValueError(self._layout_message(problem))
            pool = split_pool(split)
            rows = [row for row in rows if row[-1].strip() in pool]
        columns = [_typed([row[1 + c] for row in rows]) for c in range(num_labels)]
        keep = None if split is None else [i for i, row in enumerate(rows) if row[-1].strip() == split]
        paths = [self.root / row[0].strip() for row in rows]
        self._set_samples(paths, list(zip(*columns, strict=True)), keep)
