"""iNaturalist 2018 with the class-disjoint 70/30 retrieval splits of Smooth-AP (Brown et al., 2020)."""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

from ranklit.data.datasets.base import ImageRetrievalDataset

__all__ = ["INaturalist2018"]

# The taxonomy of train2018.json's `categories`, from the coarsest rank to the finest above the species.
_RANKS = ("kingdom", "phylum", "class", "order", "family", "genus")


class INaturalist2018(ImageRetrievalDataset):
    """iNaturalist 2018 for retrieval: 5,690 train / 2,452 test species (Smooth-AP splits), with a hierarchy.

    Reads ``Inat_dataset_splits/Inaturalist_{train,test}_set1.txt`` (or the same files in ``root``; one image path
    per line, relative to ``root``, e.g. ``train_val2018/Plantae/7477/<hash>.jpg``; the parent folder is the species
    id) and the taxonomy in ``train2018.json`` (``categories``: ``id``, ``supercategory``, ``kingdom`` … ``genus``).

    ``levels="base"`` gives ``[species, super-category]`` (HAPPIER's iNat-base, ROADMAP); ``levels="full"`` gives the
    7 levels ``[species, genus, family, order, class, phylum, kingdom]`` (HAPPIER's iNat-full). A coarser label is
    the whole path of ranks above it, so equal genus names in two families stay distinct and the hierarchy is
    consistent. Every column is relabelled to contiguous ids.

    Args:
        root: folder holding ``Inat_dataset_splits/``, ``train2018.json`` and the images.
        split: ``"train"`` or ``"test"``.
        transform: applied to the PIL image.
        levels: ``"base"`` (2 levels) or ``"full"`` (7 levels).

    Cost: parsing ``train2018.json`` (about 200 MB) takes a few seconds.

    Example:
        >>> INaturalist2018("/data/missing", levels="full")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        FileNotFoundError: INaturalist2018: dataset folder /data/missing does not exist. Expected layout ...
    """

    SPLITS = ("train", "test")
    LAYOUT = (
        "Inat_dataset_splits/Inaturalist_train_set1.txt and Inaturalist_test_set1.txt (image paths relative to "
        "root, <...>/<species id>/<file>.jpg), train2018.json (with `categories`), and the train_val2018/ images"
    )
    SOURCE = (
        "https://github.com/visipedia/inat_comp/tree/master/2018 (images, train2018.json) and "
        "https://github.com/Andrew-Brown1/Smooth_AP (Inat_dataset_splits)"
    )

    def __init__(
        self,
        root: str | Path,
        split: str = "train",
        transform: Callable[[Any], Any] | None = None,
        *,
        levels: str = "base",
    ) -> None:
        super().__init__(root, split, transform)
        if levels not in ("base", "full"):
            raise ValueError(f"INaturalist2018: `levels` must be 'base' or 'full', got {levels!r}.")
        self.levels = levels
        taxonomy = self._taxonomy(self.required_path("train2018.json"))
        name = f"Inaturalist_{split}_set1.txt"
        flat = not (self.root / "Inat_dataset_splits").is_dir() and (self.root / name).is_file()
        listing = self.required_path(name) if flat else self.required_path("Inat_dataset_splits", name)
        paths, rows = [], []
        for number, line in enumerate(listing.read_text().splitlines(), start=1):
            relative = line.strip()
            if not relative:
                continue
            species = Path(relative).parent.name
            if not species.isdigit() or int(species) not in taxonomy:
                raise self.malformed_line(listing, number, line, "a path <...>/<species id in train2018.json>/<file>")
            paths.append(self.root / relative)
            rows.append(taxonomy[int(species)])
        self.set_samples(paths, rows)

    def _taxonomy(self, path: Path) -> dict[int, tuple[Hashable, ...]]:
        """Species id -> label row (finest first) for the chosen ``levels``."""
        try:
            categories = json.loads(path.read_text())["categories"]
            if self.levels == "base":
                return {int(c["id"]): (int(c["id"]), c["supercategory"]) for c in categories}
            rows = {}
            for c in categories:
                lineage = tuple(c[rank] for rank in _RANKS)
                coarser = tuple(lineage[: len(_RANKS) - i] for i in range(len(_RANKS)))
                rows[int(c["id"])] = (int(c["id"]), *coarser)
            return rows
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(
                self._layout_message(
                    f"{path} is not the iNaturalist 2018 annotation file: expected a JSON object whose `categories` "
                    f"have `id`, `supercategory` and {', '.join(f'`{r}`' for r in _RANKS)} ({error!r})"
                )
            ) from error
