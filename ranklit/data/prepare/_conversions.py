"""From the unpacked official files to the layout each ranklit reader reads (:mod:`ranklit.data.datasets`).

Each conversion takes the staging folder where ``ranklit data prepare`` unpacked every file of a dataset (each archive
into its :attr:`~ranklit.data.prepare._entries.Archive.into` folder) and returns the folder that becomes the prepared
root; it runs before anything is moved into place, so a failure leaves no prepared root behind.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from ranklit.errors import UserError

__all__ = ["distractors", "folder_holding", "inaturalist", "revisited"]

_DEPTH = 3  # how deep below the staging folder an archive's top folder is looked for


def _find(work: Path, marker: str) -> Path:
    """The folder at most ``_DEPTH`` levels below ``work`` (or ``work``) that holds ``marker``, e.g. ``images``."""
    level = [work]
    for _ in range(_DEPTH + 1):
        found = sorted(folder for folder in level if (folder / marker).exists())
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise UserError(f"the unpacked files hold {marker} twice ({found[0]}, {found[1]}): give one archive.")
        level = [child for folder in level for child in folder.iterdir() if child.is_dir() and not child.is_symlink()]
    raise UserError(
        f"the unpacked files hold no {marker}: the archive given is not the one expected (the files unpacked: "
        f"{', '.join(sorted(p.name for p in work.iterdir())[:5]) or 'none'})."
    )


def folder_holding(marker: str) -> Callable[[Path], Path]:
    """The conversion of a dataset whose archive holds its root as it is: the folder that holds ``marker``.

    Example:
        >>> import pathlib, tempfile
        >>> work = pathlib.Path(tempfile.mkdtemp())
        >>> (work / "CUB_200_2011" / "images").mkdir(parents=True)
        >>> folder_holding("images")(work).name
        'CUB_200_2011'
    """

    def convert(work: Path) -> Path:
        return _find(work, marker)

    convert.__doc__ = f"The unpacked folder that holds {marker}."
    return convert


def inaturalist(work: Path) -> Path:
    """iNat 2018: ``train2018.json`` gets the un-obfuscated taxonomy of ``categories.json`` (as the inat_comp 2018
    README says: replace the ``categories`` list), merged by ``id`` so the ``supercategory`` stays; the Smooth-AP
    split files stay in ``Inat_dataset_splits/``."""
    root = _find(work, "train2018.json")
    annotations = root / "train2018.json"
    names = root / "categories.json"
    if names.is_file():
        data = json.loads(annotations.read_text())
        taxonomy = {int(c["id"]): c for c in json.loads(names.read_text())}
        data["categories"] = [{**c, **taxonomy.get(int(c["id"]), {})} for c in data["categories"]]
        annotations.write_text(json.dumps(data))
    _find(root, "Inaturalist_train_set1.txt")  # the Smooth-AP splits, flat or in Inat_dataset_splits/
    return root


def revisited(work: Path) -> Path:
    """ROxford5k / RParis6k: every image of the archives directly in ``jpg/`` (the Paris archives nest them in
    ``paris/<landmark>/``), next to ``gnd_<name>.pkl``."""
    images = work / "jpg"
    if not images.is_dir():
        raise UserError(f"the image archives unpacked no file into {images}: they are not the ones expected.")
    for path in sorted(images.rglob("*")):
        if path.is_file() and path.parent != images:
            if (images / path.name).exists():
                raise UserError(f"two images named {path.name} in the archives ({path}): not the official archives.")
            path.rename(images / path.name)
    for folder in [p for p in images.iterdir() if p.is_dir()]:
        shutil.rmtree(folder)
    if not list(work.glob("gnd_*.pkl")):
        raise UserError(f"no gnd_<name>.pkl among the files given ({work}): pass the ground truth with --source.")
    return work


def distractors(work: Path) -> Path:
    """R1M: the images under ``jpg/`` as ``revisitop1m.txt`` lists them, and ``r1m.csv`` (``path,label``, one label
    per image, so no two distractors match) for :class:`ranklit.data.CSVDataset`."""
    listing = work / "revisitop1m.txt"
    if not listing.is_file():
        raise UserError(f"no revisitop1m.txt among the files given ({work}): pass it with --source.")
    names = [line.strip() for line in listing.read_text().splitlines() if line.strip()]
    rows = [f"jpg/{name},{number}" for number, name in enumerate(names)]
    (work / "r1m.csv").write_text("\n".join(["path,label", *rows]) + "\n")
    return work
