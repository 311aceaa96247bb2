"""Builders of tiny copies of the official dataset layouts (real file names and headers, a few small JPEGs)."""

from __future__ import annotations

import json
import pickle
import struct
import zlib
from pathlib import Path

from PIL import Image


def jpeg(path: Path, seed: int = 0, size: tuple[int, int] = (12, 10), mode: str = "RGB") -> Path:
    """Write a small JPEG whose colour depends on ``seed``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    colour = (seed * 37 % 256, seed * 91 % 256, seed * 53 % 256)
    Image.new(mode, size, colour if mode == "RGB" else colour[0]).save(path, "JPEG")
    return path


def cub(root: Path, classes: dict[int, int]) -> Path:
    """``images/<NNN.Name>/<Name>_<i>.jpg`` for each class id -> image count; one grayscale image in class 1."""
    for number, count in classes.items():
        folder = root / "images" / f"{number:03d}.Bird_{number}"
        for i in range(count):
            mode = "L" if (number, i) == (1, 0) else "RGB"
            seed = number * 100 + i  # every file's content its own (data check flags identical files)
            jpeg(folder / f"Bird_{number}_{i:04d}_{seed}.jpg", seed, mode=mode)
    return root


def sop(root: Path) -> dict[str, list[tuple[int, int, int, str]]]:
    """Ebay_train.txt (classes 1-3, super 1-2) and Ebay_test.txt (classes 4-6, super 1-2)."""
    lists: dict[str, list[tuple[int, int, int, str]]] = {"train": [], "test": []}
    image_id = 0
    for split, classes in (("train", (1, 2, 3)), ("test", (4, 5, 6))):
        for c in classes:
            supers = 1 + c % 2
            folder = ("bicycle_final", "chair_final")[supers - 1]
            for i in range(2 + c % 2):
                image_id += 1
                relative = f"{folder}/{c}{i:02d}_{i}.JPG"
                jpeg(root / relative, image_id)
                lists[split].append((image_id, c, supers, relative))
        lines = ["image_id class_id super_class_id path"] + [" ".join(map(str, row)) for row in lists[split]]
        (root / f"Ebay_{split}.txt").write_text("\n".join(lines) + "\n")
    return lists


# id, supercategory, kingdom, phylum, class, order, family, genus (two genera named "Alpha" in different families)
INAT_CATEGORIES = [
    (0, "Plantae", "Plantae", "Tracheophyta", "Magnoliopsida", "Rosales", "Rosaceae", "Alpha"),
    (1, "Plantae", "Plantae", "Tracheophyta", "Magnoliopsida", "Rosales", "Rosaceae", "Alpha"),
    (2, "Plantae", "Plantae", "Tracheophyta", "Magnoliopsida", "Fabales", "Fabaceae", "Alpha"),
    (3, "Aves", "Animalia", "Chordata", "Aves", "Passeriformes", "Corvidae", "Corvus"),
    (4, "Aves", "Animalia", "Chordata", "Aves", "Passeriformes", "Corvidae", "Pica"),
    (5, "Insecta", "Animalia", "Arthropoda", "Insecta", "Lepidoptera", "Nymphalidae", "Danaus"),
]


def inaturalist(root: Path, train: tuple[int, ...] = (0, 2, 3, 5), test: tuple[int, ...] = (1, 4)) -> None:
    """train2018.json (categories with taxonomy, plus images/annotations keys) and the Smooth-AP split files."""
    keys = ("id", "supercategory", "kingdom", "phylum", "class", "order", "family", "genus")
    categories = [{**dict(zip(keys, row, strict=True)), "name": f"Species {row[0]}"} for row in INAT_CATEGORIES]
    (root / "train2018.json").parent.mkdir(parents=True, exist_ok=True)
    (root / "train2018.json").write_text(json.dumps({"images": [], "annotations": [], "categories": categories}))
    (root / "Inat_dataset_splits").mkdir()
    for split, species in (("train", train), ("test", test)):
        lines = []
        for s in species:
            for i in range(3):
                relative = f"train_val2018/{INAT_CATEGORIES[s][1]}/{s}/{s:02d}{i:030x}.jpg"
                jpeg(root / relative, s * 3 + i)
                lines.append(relative)
        (root / "Inat_dataset_splits" / f"Inaturalist_{split}_set1.txt").write_text("\n".join(lines) + "\n")


INSHOP_ROWS = [
    ("img/WOMEN/Dresses/id_00000002/02_1_front.jpg", "id_00000002", "train"),
    ("img/WOMEN/Dresses/id_00000002/02_2_side.jpg", "id_00000002", "train"),
    ("img/MEN/Denim/id_00000007/01_1_front.jpg", "id_00000007", "train"),
    ("img/MEN/Denim/id_00000007/01_2_side.jpg", "id_00000007", "train"),
    ("img/WOMEN/Denim/id_00000010/03_1_front.jpg", "id_00000010", "query"),
    ("img/WOMEN/Denim/id_00000010/03_2_side.jpg", "id_00000010", "gallery"),
    ("img/WOMEN/Denim/id_00000010/03_4_full.jpg", "id_00000010", "gallery"),
    ("img/MEN/Tees_Tanks/id_00000012/01_1_front.jpg", "id_00000012", "gallery"),
    ("img/MEN/Tees_Tanks/id_00000014/01_1_front.jpg", "id_00000014", "query"),
    ("img/MEN/Tees_Tanks/id_00000014/01_3_back.jpg", "id_00000014", "gallery"),
]


def inshop(root: Path, nested: bool = False) -> None:
    """list_eval_partition.txt (count line, header, padded columns) and img/; or Eval/ + Img/img/ if ``nested``."""
    lines = [str(len(INSHOP_ROWS)), "image_name item_id evaluation_status"]
    lines += [f"{path:<70}{item} {status}" for path, item, status in INSHOP_ROWS]
    (root / "Eval" if nested else root).mkdir(parents=True, exist_ok=True)
    (root / ("Eval" if nested else ".") / "list_eval_partition.txt").write_text("\n".join(lines) + "\n")
    for i, (path, _, _) in enumerate(INSHOP_ROWS):
        jpeg(root / ("Img" if nested else ".") / path, i)


def vehicleid(root: Path) -> None:
    """train_test_split/{train_list,test_list_800,1600,2400}.txt, attribute/model_attr.txt, image/*.jpg."""
    lists = {
        "train_list.txt": [(1, 3), (2, 2), (3, 2)],
        "test_list_800.txt": [(10, 2)],
        "test_list_1600.txt": [(10, 2), (11, 2)],
        "test_list_2400.txt": [(10, 2), (11, 2), (12, 3)],
    }
    (root / "train_test_split").mkdir(parents=True)
    for name, vehicles in lists.items():
        lines = [f"{vid:07d}{i} {vid}" for vid, count in vehicles for i in range(count)]
        (root / "train_test_split" / name).write_text("\n".join(lines) + "\n")
        for line in lines:
            jpeg(root / "image" / f"{line.split()[0]}.jpg", int(line.split()[1]))
    (root / "attribute").mkdir()
    (root / "attribute" / "model_attr.txt").write_text("1 5\n2 5\n10 7\n11 8\n")  # 3 and 12 have no model


def dyml(root: Path, glued: bool = True) -> None:
    """train/label.csv and bmk_{fine,middle,coarse}/{query,gallery}.csv with their images, mini-bmk_all_in_one.

    ``glued``: the header runs into the first row, columns `fname, coarse_id, middle_id, fine_id` (as shipped);
    otherwise the header `fname, fine_id, middle_id, coarse_id` is on its own line.
    """
    train = [(f"{i}.jpg", 10 + i // 2, 20 + i // 4, 30 + i // 8) for i in range(8)]  # fine, middle, coarse
    tables = {
        "train/label.csv": ("train/imgs", train),
        "mini-bmk_all_in_one/label.csv": ("mini-bmk_all_in_one/imgs", train[:4]),
    }
    for csv_path, (images, rows) in tables.items():
        if glued:
            body = [f"{f}, {c}, {m}, {fi}" for f, fi, m, c in rows]
            text = "fname, coarse_id, middle_id, fine_id" + "\n".join(body) + "\n"
        else:
            text = "fname, fine_id, middle_id, coarse_id\n" + "\n".join(", ".join(map(str, r)) for r in rows) + "\n"
        (root / csv_path).parent.mkdir(parents=True, exist_ok=True)
        (root / csv_path).write_text(text)
        for i, (fname, *_) in enumerate(rows):
            jpeg(root / images / fname, i)
    for granularity in ("fine", "middle", "coarse"):
        for part, labels in (("query", [5, 6]), ("gallery", [6, 5, 5, 9])):
            rows_text = [f"{i}.jpg, {label}" for i, label in enumerate(labels)]
            header = "fname, labels" + ("" if glued else "\n")
            (root / f"bmk_{granularity}").mkdir(parents=True, exist_ok=True)
            (root / f"bmk_{granularity}" / f"{part}.csv").write_text(header + "\n".join(rows_text) + "\n")
            for i in range(len(labels)):
                jpeg(root / f"bmk_{granularity}" / part / f"{i}.jpg", i)


def revisited(root: Path, name: str = "roxford5k") -> dict:
    """gnd_<name>.pkl (imlist, qimlist, gnd with bbx/easy/hard/junk) and jpg/ (queries are also in imlist)."""
    imlist = [f"{name}_img_{i}" for i in range(6)]
    gnd = [
        {"bbx": [2.0, 1.0, 10.0, 7.0], "easy": [1, 2], "hard": [3], "junk": [4]},
        {"bbx": [0.0, 0.0, 5.0, 5.0], "easy": [5], "hard": [], "junk": [0]},
    ]
    data = {"imlist": imlist, "qimlist": imlist[:2], "gnd": gnd}
    root.mkdir(parents=True, exist_ok=True)
    with (root / f"gnd_{name}.pkl").open("wb") as handle:
        pickle.dump(data, handle)
    for i, image in enumerate(imlist):
        jpeg(root / "jpg" / f"{image}.jpg", i, size=(16, 12))
    return data


def bomb(path: Path, width: int = 30000, height: int = 30000) -> None:
    """A PNG whose header says ``width x height`` pixels (900 megapixels): Pillow's decompression-bomb limit."""
    Image.new("L", (4, 4)).save(path)
    data = bytearray(path.read_bytes())
    struct.pack_into(">II", data, 16, width, height)
    struct.pack_into(">I", data, 29, zlib.crc32(bytes(data[12:29])))
    path.write_bytes(bytes(data))
