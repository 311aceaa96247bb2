"""Miniature copies of each dataset's official files, in the archives' own layout (a few tiny JPEGs each).

Each builder writes the dataset with :mod:`tests.data.layouts` (the readers' formats) and packs it as the owners
ship it: ``CUB_200_2011.tgz`` holds ``CUB_200_2011/`` and ``attributes.txt``, ``Stanford_Online_Products.zip`` its
folder, In-Shop is ``img.zip`` (``img/...``) and ``list_eval_partition.txt``, iNat 2018 four files (images, annotations
with obfuscated taxon names, the un-obfuscated ``categories.json``, the Smooth-AP splits zip), Oxford a flat
``oxbuild_images.tgz``, Paris two archives nesting ``paris/<landmark>/``, R1M 100 archives and ``revisitop1m.txt``.
Where the owners' inner layout is not published (DyML, VehicleID, R1M's inner folders), the archive holds the folder
the reader reads.
"""

from __future__ import annotations

import io
import json
import random
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

from tests.data import layouts


def tree(folder: Path, prefix: str = "") -> dict[str, bytes]:
    """Every file under ``folder`` as ``{prefix/relative path: content}``."""
    return {
        f"{prefix}{path.relative_to(folder).as_posix()}": path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def tar(files: dict[str, bytes], compress: bool = True) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz" if compress else "w") as bundle:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            bundle.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def zip_(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        for name, content in files.items():
            bundle.writestr(name, content)
    return buffer.getvalue()


def cub(work: Path, padding: int = 0) -> dict[str, bytes]:
    """``padding`` random bytes more in ``CUB_200_2011/attributes/`` (an archive of several 1 MiB chunks)."""
    root = layouts.cub(work / "CUB_200_2011", {1: 3, 2: 3, 3: 2, 101: 3, 102: 3, 103: 2})
    (root / "classes.txt").write_text("1 001.Bird_1\n")
    extra = {"CUB_200_2011/attributes/padding.bin": random.Random(0).randbytes(padding)} if padding else {}
    files = {**tree(root, "CUB_200_2011/"), "attributes.txt": b"1 has_bill_shape\n", **extra}
    return {"CUB_200_2011.tgz": tar(files)}


def sop(work: Path) -> dict[str, bytes]:
    layouts.sop(work / "Stanford_Online_Products")
    return {"Stanford_Online_Products.zip": zip_(tree(work / "Stanford_Online_Products", "Stanford_Online_Products/"))}


def inshop(work: Path) -> dict[str, bytes]:
    layouts.inshop(work)
    listing = (work / "list_eval_partition.txt").read_bytes()
    return {"img.zip": zip_(tree(work / "img", "img/")), "list_eval_partition.txt": listing}


def vehicleid(work: Path) -> dict[str, bytes]:
    layouts.vehicleid(work / "VehicleID_V1.0")
    return {"VehicleID_V1.0.zip": zip_(tree(work / "VehicleID_V1.0", "VehicleID_V1.0/"))}


def inaturalist(work: Path) -> dict[str, bytes]:
    layouts.inaturalist(work)
    annotations = json.loads((work / "train2018.json").read_text())
    named = annotations["categories"]
    ranks = ("kingdom", "phylum", "class", "order", "family", "genus", "name")
    hidden = [{**c, **{r: f"{r}-{zlib.crc32(c[r].encode())}" for r in ranks}} for c in named]  # obfuscated, as released
    annotations["categories"] = hidden
    return {
        "train_val2018.tar.gz": tar(tree(work / "train_val2018", "train_val2018/")),
        "train2018.json.tar.gz": tar({"train2018.json": json.dumps(annotations).encode()}),
        "categories.json.tar.gz": tar({"categories.json": json.dumps(named).encode()}),
        "Inat_dataset_splits.zip": zip_(tree(work / "Inat_dataset_splits", "Inat_dataset_splits/")),
    }


def dyml(kind: str) -> Callable[[Path], dict[str, bytes]]:
    def build(work: Path) -> dict[str, bytes]:
        layouts.dyml(work / f"dyml_{kind}")
        for seed, path in enumerate(sorted((work / f"dyml_{kind}").rglob("*.jpg"))):
            layouts.jpeg(path, seed)  # distinct images: the same picture in train and a benchmark is a leak
        return {f"dyml_{kind}.tar": tar(tree(work / f"dyml_{kind}", f"dyml_{kind}/"), compress=False)}

    return build


def roxford5k(work: Path) -> dict[str, bytes]:
    layouts.revisited(work, "roxford5k")
    ground_truth = (work / "gnd_roxford5k.pkl").read_bytes()
    return {"oxbuild_images.tgz": tar(tree(work / "jpg")), "gnd_roxford5k.pkl": ground_truth}


def rparis6k(work: Path) -> dict[str, bytes]:
    layouts.revisited(work, "rparis6k")
    images = sorted((work / "jpg").iterdir())
    landmark = ("defense", "eiffel")
    parts = [
        {f"paris/{landmark[i % 2]}/{p.name}": p.read_bytes() for i, p in enumerate(images) if i % 2 == n}
        for n in (0, 1)
    ]
    ground_truth = (work / "gnd_rparis6k.pkl").read_bytes()
    return {"paris_1.tgz": tar(parts[0]), "paris_2.tgz": tar(parts[1]), "gnd_rparis6k.pkl": ground_truth}


def r1m(work: Path) -> dict[str, bytes]:
    files, names = {}, []
    for i in range(1, 101):
        name = f"{i % 7}/{i:03d}/distractor_{i}.jpg"
        names.append(name)
        files[f"revisitop1m.{i}.tar.gz"] = tar({name: layouts.jpeg(work / f"{i}.jpg", i).read_bytes()})
    return {**files, "revisitop1m.txt": ("\n".join(names) + "\n").encode()}


MINIATURES: dict[str, Callable[[Path], dict[str, bytes]]] = {
    "cub": cub,
    "sop": sop,
    "inshop": inshop,
    "vehicleid": vehicleid,
    "inaturalist": inaturalist,
    "dyml-animal": dyml("animal"),
    "dyml-product": dyml("product"),
    "dyml-vehicle": dyml("vehicle"),
    "roxford5k": roxford5k,
    "rparis6k": rparis6k,
    "r1m": r1m,
}
