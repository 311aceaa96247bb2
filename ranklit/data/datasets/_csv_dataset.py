"""Generic retrieval dataset described by a CSV file: ``path,label[,coarser labels...][,split]``."""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

from ranklit.data.datasets._inside_root import OUTSIDE_FIX, outside_root
from ranklit.data.datasets.base import ImageRetrievalDataset, split_pool
from ranklit.data.datasets.validation import DatasetError, Problems
from ranklit.errors import UserError

__all__ = ["CSVDataset", "SPLIT_VALUES"]

SPLIT_VALUES: tuple[str, ...] = ("train", "val", "test", "query", "gallery")
"""The values a ``split`` column may hold (lower case); a row with another value is reported, not dropped."""

Rows = list[tuple[int, list[str]]]  # (line number, stripped fields)


def _text_lines(path: Path) -> list[str]:
    """The lines of a CSV file saved as UTF-8, with or without the byte-order mark Excel's "CSV UTF-8" writes; any
    other encoding (Latin-1, Windows-1252: Excel's plain "CSV") is refused naming the line, rather than guessed (a wrong
    guess would change class names silently)."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig").splitlines(keepends=True)
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise UserError(
            f"{path}, line {line}: byte 0x{data[error.start]:02x} is not UTF-8; save the file as UTF-8 (Excel: "
            "\"CSV UTF-8\"; or `iconv -f latin1 -t utf-8 OLD.csv > NEW.csv`)."
        ) from None


def _typed(column: list[str]) -> list[Hashable]:
    """A label column as ints when every value is an integer, else as the strings themselves."""
    if all(v.strip().lstrip("-").isdigit() for v in column):
        return [int(v) for v in column]
    return list(column)


class CSVDataset(ImageRetrievalDataset):
    """Images and labels listed in a CSV file with a header: ``path``, one or more label columns, optional ``split``.

    The label columns go from the finest to the coarsest (``path,label,super_label,split`` gives ``[N, 2]``
    labels); their values may be integers or strings. Paths are relative to ``root`` and must stay inside it (an
    absolute path under ``root`` is accepted; one elsewhere, or ``..`` above ``root``, is refused: symbolic links
    inside ``root`` are followed, :mod:`ranklit.data.datasets._inside_root`). The file is UTF-8, with or without
    Excel's byte-order mark; another encoding is refused naming the line. With a
    ``split`` column, ``split="train"`` keeps the rows marked ``train``; ``"query"`` and ``"gallery"`` are relabelled
    together so their ids match; ``split=None`` keeps every row. Labels are relabelled to contiguous ids per column
    (the original values are in ``class_names``).

    The file is checked before training and every problem is reported in one
    :class:`~ranklit.data.datasets.validation.DatasetError` (a count and the first lines of each kind): rows with too
    few or too many fields or an empty one, split values other than ``SPLIT_VALUES`` (``Train``, ``tset``), a
    requested split with no row, and, for the rows read, missing or empty files and files listed twice.

    Args:
        root: folder the image paths are relative to.
        split: value of the ``split`` column to keep, or ``None`` for every row.
        transform: applied to the PIL image.
        csv_file: the CSV file, relative to ``root`` or absolute.

    Example:
        >>> import tempfile, pathlib
        >>> from PIL import Image
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (folder / "data.csv").write_text("path,label,coarse,split\\na.jpg,7,1,train\\nb.jpg,9,1,train\\n")
        >>> for name in ("a.jpg", "b.jpg"):
        ...     Image.new("RGB", (4, 4)).save(folder / name)
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
        path = Path(csv_file) if Path(csv_file).is_absolute() else self.required_path(str(csv_file))
        if not path.is_file():
            raise FileNotFoundError(self._layout_message(f"file {path} not found"))
        records = [(number, row) for number, row in enumerate(csv.reader(_text_lines(path)), start=1) if row]
        header = [name.strip() for name in records[0][1]] if records else []
        has_split = bool(header) and header[-1] == "split"
        num_labels = len(header) - 1 - has_split
        if not header or header[0] != "path" or num_labels < 1:
            raise self.malformed_line(path, 1, ",".join(header), "the header `path,label[,coarser labels...][,split]`")
        if split is not None and not has_split:
            problem = f"{path} has no `split` column (its header: {','.join(header)}), so no rows with split {split!r}"
            raise DatasetError(self._layout_message(problem))
        problems = Problems(type(self).__name__, path)
        rows = self._well_formed(records[1:], header, problems)
        if has_split:
            rows = self._known_splits(rows, split, problems)
        pool = (None,) if split is None else split_pool(split)
        rows = [(number, row) for number, row in rows if split is None or row[-1] in pool]
        columns = [_typed([row[1 + c] for _, row in rows]) for c in range(num_labels)]
        keep = None if split is None else [i for i, (_, row) in enumerate(rows) if row[-1] == split]
        outside = set(outside_root(self.root, [row[0] for _, row in rows]))
        problems.add(
            f"rows whose path leads outside root {self.root}",
            [f"line {rows[i][0]} ({rows[i][1][0]})" for i in sorted(outside)],
            OUTSIDE_FIX,
        )
        paths = [self.root / row[0] for _, row in rows]
        shown = [f"line {number} ({row[0]})" for number, row in rows]
        self.set_samples(paths, list(zip(*columns, strict=True)), keep, problems, shown)

    @staticmethod
    def _well_formed(records: list[tuple[int, list[str]]], header: list[str], problems: Problems) -> Rows:
        """The rows with one non-empty field per column (stripped); the others are recorded as problems."""
        rows: Rows = []
        short: list[str] = []
        long: list[str] = []
        empty: list[str] = []
        for number, row in records:
            fields = [v.strip() for v in row]
            if len(fields) != len(header):
                (short if len(fields) < len(header) else long).append(f"line {number}")
            elif not all(fields):
                empty.append(f"line {number}")
            else:
                rows.append((number, fields))
        columns = f"{len(header)} ({','.join(header)})"
        problems.add(f"rows with fewer fields than the header's {columns}", short, "Complete them")
        problems.add(f"rows with more fields than the header's {columns}", long, "Quote fields holding commas")
        problems.add("rows with an empty field", empty, "Fill or remove them")
        return rows

    @staticmethod
    def _known_splits(rows: Rows, split: str | None, problems: Problems) -> Rows:
        """The rows whose split value is one of ``SPLIT_VALUES``; rows with another value (``Train``, ``tset``) are
        recorded as problems, listing the values found and those expected; so is a requested split with no row."""
        unknown = [(number, row[-1]) for number, row in rows if row[-1] not in SPLIT_VALUES]
        if unknown:
            found = Counter(value for _, value in unknown)
            problems.add(
                f"rows with an unknown split value (found {', '.join(f'{v!r} x{n}' for v, n in found.items())}; "
                f"expected one of {', '.join(SPLIT_VALUES)})",
                [f"line {number}" for number, _ in unknown],
            )
        present = sorted({row[-1] for _, row in rows})
        if split is not None and split not in present:
            problems.add(f"rows with split {split!r} (splits present: {present}); none", [f"split {split!r}"])
        return [(number, row) for number, row in rows if row[-1] in SPLIT_VALUES]
