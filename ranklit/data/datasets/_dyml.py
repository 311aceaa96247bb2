"""DyML-Vehicle, DyML-Animal and DyML-Product (Sun et al., CVPR 2021): three-level hierarchies (HAPPIER §4)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ranklit.data.datasets.base import ImageRetrievalDataset

__all__ = ["DyML"]

_KNOWN_COLUMNS = ("fname", "fine_id", "middle_id", "coarse_id", "class_id", "labels", "label")
_HIERARCHY = ("fine_id", "middle_id", "coarse_id")


class DyML(ImageRetrievalDataset):
    """The DyML benchmarks: training set with ``[fine, middle, coarse]`` labels, test benchmarks per granularity.

    Files, as shipped (the CSVs are comma + space separated, so their column names carry a leading space, and the
    header line runs straight into the first data row, e.g. ``fname, coarse_id, middle_id, fine_id0.jpg, 3, 9, 71``;
    columns are matched by name, so a header on its own line in any column order is read as well):

    - ``split="train"``: ``train/label.csv`` (``fname``, ``fine_id``, ``middle_id``, ``coarse_id``), images in
      ``train/imgs/``; labels ``[N, 3]``, relabelled to contiguous ids.
    - ``split="query"`` / ``"gallery"``: ``bmk_<granularity>/{query,gallery}.csv`` (``fname`` and one label
      column), images in ``bmk_<granularity>/{query,gallery}/``; labels ``[N]``, query and gallery relabelled
      together (DyML-Vehicle and DyML-Animal).
    - ``split="test"``: ``mini-bmk_all_in_one/label.csv`` with ``imgs/`` (DyML-Product's three-level test set).

    Args:
        root: the ``dyml_vehicle`` / ``dyml_animal`` / ``dyml_product`` folder.
        split: ``"train"``, ``"query"``, ``"gallery"`` or ``"test"``.
        transform: applied to the PIL image.
        granularity: benchmark of the query/gallery splits: ``"fine"``, ``"middle"`` or ``"coarse"``.

    Example:
        >>> import pathlib, tempfile
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> (root / "train").mkdir()
        >>> shipped = "fname, coarse_id, middle_id, fine_id0.jpg, 1, 4, 9\\n1.jpg, 1, 4, 8"  # header glued to row 1
        >>> _ = (root / "train" / "label.csv").write_text(shipped)
        >>> (root / "train" / "imgs").mkdir()
        >>> for name in ("0.jpg", "1.jpg"):  # the images (here: placeholders, only listed)
        ...     _ = (root / "train" / "imgs" / name).write_bytes(b"\\xff\\xd8")
        >>> data = DyML(root, "train")
        >>> data.class_names, data.paths[0].relative_to(root).as_posix()
        ([[8, 9], [4], [1]], 'train/imgs/0.jpg')
    """

    SPLITS = ("train", "query", "gallery", "test")
    LAYOUT = (
        "train/label.csv (`fname, fine_id, middle_id, coarse_id`) with train/imgs/; "
        "bmk_{fine,middle,coarse}/{query,gallery}.csv (`fname, <label>`) with bmk_*/query/ and bmk_*/gallery/; "
        "for DyML-Product mini-bmk_all_in_one/label.csv with mini-bmk_all_in_one/imgs/"
    )
    SOURCE = "https://github.com/SupetZYK/DynamicMetricLearning (OneDrive / Baidu links in its README)"

    def __init__(
        self,
        root: str | Path,
        split: str = "train",
        transform: Callable[[Any], Any] | None = None,
        *,
        granularity: str = "fine",
    ) -> None:
        super().__init__(root, split, transform)
        if granularity not in ("fine", "middle", "coarse"):
            raise ValueError(f"DyML: `granularity` must be 'fine', 'middle' or 'coarse', got {granularity!r}.")
        self.granularity = granularity
        if split in ("train", "test"):
            folder = "train" if split == "train" else "mini-bmk_all_in_one"
            table = self._read_csv(self.required_path(folder, "label.csv"), _HIERARCHY)
            paths = [self.root / folder / "imgs" / row["fname"] for row in table]
            self.set_samples(paths, [tuple(row[c] for c in _HIERARCHY) for row in table])
            return
        paths, rows, keep = [], [], []
        for part in ("query", "gallery"):
            table = self._read_csv(self.required_path(f"bmk_{granularity}", f"{part}.csv"), ())
            keep += list(range(len(paths), len(paths) + len(table))) if part == split else []
            paths += [self.root / f"bmk_{granularity}" / part / row["fname"] for row in table]
            rows += [(row["label"],) for row in table]
        self.set_samples(paths, rows, keep)

    def _read_csv(self, path: Path, label_columns: tuple[str, ...]) -> list[dict[str, Any]]:
        """Rows of a DyML CSV as dicts with ``fname`` and integer labels (``label`` for a two-column file)."""
        lines = path.read_text().splitlines()
        names, first_row = self._header(path, lines[0] if lines else "")
        wanted = label_columns or tuple(n for n in names if n != "fname")
        if "fname" not in names or not set(wanted) <= set(names) or (not label_columns and len(names) != 2):
            expected = ", ".join(("fname", *label_columns)) if label_columns else "fname, <label>"
            raise self.malformed_line(path, 1, lines[0] if lines else "", f"the header `{expected}`")
        table = []
        rows = ([first_row] if first_row else []) + [line.split(",") for line in lines[1:] if line.strip()]
        for number, fields in enumerate(rows, start=1 if first_row else 2):
            # strict=False: a row with the wrong number of fields gets the error message just below
            values = dict(zip(names, (f.strip() for f in fields), strict=False))
            if len(fields) != len(names) or not all(values[c].lstrip("-").isdigit() for c in wanted):
                raise self.malformed_line(path, number, ",".join(fields), f"{len(names)} fields: {', '.join(names)}")
            labels = {c: int(values[c]) for c in wanted}
            table.append({"fname": values["fname"], **(labels if label_columns else {"label": labels[wanted[0]]})})
        return table

    def _header(self, path: Path, line: str) -> tuple[list[str], list[str] | None]:
        """Column names of the header line, and the data row glued to its end (if any)."""
        fields = line.split(",")
        names: list[str] = []
        for position, field in enumerate(fields):
            name = field.strip()
            known = next((c for c in sorted(_KNOWN_COLUMNS, key=len, reverse=True) if name.startswith(c)), None)
            if known is None:
                raise self.malformed_line(path, 1, line, f"a header of column names among {', '.join(_KNOWN_COLUMNS)}")
            names.append(known)
            if name != known:  # the first data row starts right after this name
                return names, [name[len(known) :], *fields[position + 1 :]]
        return names, None
