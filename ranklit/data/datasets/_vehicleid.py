"""PKU VehicleID (Liu et al., 2016): 13,164 training vehicles; small / medium / large test sets."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

from ranklit.data.datasets.base import ImageRetrievalDataset

__all__ = ["VehicleID"]

_LISTS = {
    "train": "train_list.txt",
    "small": "test_list_800.txt",
    "medium": "test_list_1600.txt",
    "large": "test_list_2400.txt",
}


class VehicleID(ImageRetrievalDataset):
    """VehicleID with labels ``[vehicle id, vehicle model]``; test sets of 800 / 1,600 / 2,400 vehicles.

    Reads ``train_test_split/{train_list,test_list_800,test_list_1600,test_list_2400}.txt`` (lines
    ``<image name> <vehicle id>``), the images ``image/<image name>.jpg`` and, for the model level,
    ``attribute/model_attr.txt`` (lines ``<vehicle id> <model id>``). Only part of the vehicles have a model
    annotation: each vehicle without one gets a model class of its own (``("none", vehicle id)``), so it never
    shares a coarse label with another vehicle. Evaluation follows the deep-metric-learning protocol used by FastAP:
    every test image queries all the others.

    Args:
        root: the ``VehicleID_V1.0`` folder.
        split: ``"train"``, or the test set ``"small"``, ``"medium"`` or ``"large"``.
        transform: applied to the PIL image.

    Example:
        >>> import pathlib, tempfile
        >>> VehicleID(pathlib.Path(tempfile.mkdtemp()), "medium")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        FileNotFoundError: VehicleID: file .../attribute/model_attr.txt not found. Expected layout ...
    """

    SPLITS = tuple(_LISTS)
    LAYOUT = (
        "train_test_split/train_list.txt, test_list_800.txt, test_list_1600.txt, test_list_2400.txt (lines "
        "`<image name> <vehicle id>`), attribute/model_attr.txt (lines `<vehicle id> <model id>`), image/<name>.jpg"
    )
    SOURCE = "https://www.pkuml.org/resources/pku-vehicleid.html (request form)"

    def __init__(self, root: str | Path, split: str = "train", transform: Callable[[Any], Any] | None = None) -> None:
        super().__init__(root, split, transform)
        model_attr = self.required_path("attribute", "model_attr.txt")
        models = {int(v): m for v, m in self._pairs(model_attr, "`<vehicle id> <model id>`", numeric_first=True)}
        listing = self.required_path("train_test_split", _LISTS[split])
        paths, rows = [], []
        for image, vehicle in self._pairs(listing, "`<image name> <vehicle id>`"):
            paths.append(self.root / "image" / f"{image}.jpg")
            model: Hashable = ("model", models[vehicle]) if vehicle in models else ("none", vehicle)
            rows.append((vehicle, model))
        self.set_samples(paths, rows)

    def _pairs(self, path: Path, expected: str, numeric_first: bool = False) -> list[tuple[str, int]]:
        pairs = []
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 2 or not fields[1].isdigit() or (numeric_first and not fields[0].isdigit()):
                raise self.malformed_line(path, number, line, expected)
            pairs.append((fields[0], int(fields[1])))
        return pairs
