"""CSVDataset, ClassFolderDataset and the shared base: relabelling, decode errors, items through a DataLoader."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

from ranklit.data import ClassFolderDataset, CSVDataset, PKSampler
from ranklit.data.datasets.base import contiguous_labels, load_image
from ranklit.data.images import transforms as T
from tests.data import layouts

_CSV = """path,label,family,split
a/1.jpg,17,birds,train
a/2.jpg,17,birds,train
b/1.jpg,3,fish,train
c/1.jpg,40,birds,query
c/2.jpg,40,birds,gallery
d/1.jpg,41,fish,gallery
"""


def _csv_layout(root: Path, text: str = _CSV) -> None:
    (root / "data.csv").write_text(text)
    for i, line in enumerate(text.splitlines()[1:]):
        layouts.jpeg(root / line.split(",")[0], i)


def test_csv_splits_and_labels(tmp_path: Path) -> None:
    _csv_layout(tmp_path)
    train = CSVDataset(tmp_path, "train", csv_file="data.csv")
    assert train.labels.tolist() == [[1, 0], [1, 0], [0, 1]] and train.class_names == [[3, 17], ["birds", "fish"]]
    assert train.num_classes == 2 and train.paths[2] == tmp_path / "b" / "1.jpg"
    query = CSVDataset(tmp_path, "query", csv_file=tmp_path / "data.csv")
    gallery = CSVDataset(tmp_path, "gallery", csv_file="data.csv")
    assert query.class_names == gallery.class_names == [[40, 41], ["birds", "fish"]]
    assert query.labels.tolist() == [[0, 0]] and gallery.labels.tolist() == [[0, 0], [1, 1]]
    everything = CSVDataset(tmp_path, csv_file="data.csv")
    assert len(everything) == 6 and everything.num_classes == 4


def test_csv_flat_without_split(tmp_path: Path) -> None:
    _csv_layout(tmp_path, "path,label\nx.jpg,cat\ny.jpg,dog\nz.jpg,cat\n")
    data = CSVDataset(tmp_path, csv_file="data.csv")
    assert data.labels.tolist() == [0, 1, 0] and data.class_names == [["cat", "dog"]]
    with pytest.raises(ValueError, match=r"has no `split` column \(its header: path,label\), so no rows with split"):
        CSVDataset(tmp_path, "train", csv_file="data.csv")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("file,label\nx.jpg,1\n", "line 1: expected the header `path,label"),
        ("path,split\nx.jpg,train\n", "line 1: expected the header"),
        ("path,label\nx.jpg,1,2\n", "1 rows with more fields than the header's 2 \\(path,label\\): line 2"),
        ("path,label,split\nx.jpg,,train\n", "1 rows with an empty field: line 2"),
    ],
)
def test_csv_errors(tmp_path: Path, text: str, match: str) -> None:
    (tmp_path / "dataset.csv").write_text(text)
    with pytest.raises(ValueError, match=match):
        CSVDataset(tmp_path)


def test_csv_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"dataset\.csv not found\. Expected layout .*path,label"):
        CSVDataset(tmp_path)


def test_class_folder_flat_nested_and_splits(tmp_path: Path) -> None:
    for i, name in enumerate(["train/cat/1.jpg", "train/cat/2.png", "train/dog/1.jpg"]):
        layouts.jpeg(tmp_path / name, i)
    (tmp_path / "train" / "dog" / "notes.txt").write_text("not an image")
    train = ClassFolderDataset(tmp_path, "train")
    assert len(train) == 3 and train.labels.tolist() == [0, 0, 1] and train.class_names == [["cat", "dog"]]
    for i, name in enumerate(["query/b/1.jpg", "gallery/a/1.jpg", "gallery/b/2.jpg"]):
        layouts.jpeg(tmp_path / name, i)
    query, gallery = ClassFolderDataset(tmp_path, "query"), ClassFolderDataset(tmp_path, "gallery")
    assert query.labels.tolist() == [1] and gallery.labels.tolist() == [0, 1]  # shared ids: b -> 1 in both
    nested = tmp_path / "nested"
    for i, name in enumerate(["x/same/1.jpg", "x/other/1.jpg", "y/same/1.jpg", "y/same/2.jpg"]):
        layouts.jpeg(nested / name, i)
    data = ClassFolderDataset(nested, levels=2)
    assert data.labels.tolist() == [[0, 0], [1, 0], [2, 1], [2, 1]]  # x/same and y/same are different classes
    assert data.class_names == [["x/other", "x/same", "y/same"], ["x", "y"]]


def test_class_folder_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"folder .*train not found.*one folder per class"):
        ClassFolderDataset(tmp_path, "train")
    (tmp_path / "empty_class").mkdir()
    with pytest.raises(ValueError, match="split None lists no image"):
        ClassFolderDataset(tmp_path)
    with pytest.raises(ValueError, match="`levels` must be a positive integer"):
        ClassFolderDataset(tmp_path, levels=0)


def test_decode_error_names_the_path(tmp_path: Path) -> None:
    bad = tmp_path / "cat" / "broken.jpg"
    bad.parent.mkdir()
    bad.write_bytes(b"\xff\xd8 not really a jpeg")
    with pytest.raises(ValueError, match=r"Could not decode image .*cat/broken\.jpg"):
        ClassFolderDataset(tmp_path)[0]
    with pytest.raises(FileNotFoundError, match=r"Image file not found: .*missing\.jpg"):
        load_image(tmp_path / "missing.jpg")


def test_contiguous_labels_roundtrip() -> None:
    rows = [(5, "b"), (2, "a"), (5, "b"), (9, "a")]
    labels, names = contiguous_labels(rows)
    assert labels.dtype == torch.long and labels.shape == (4, 2)
    assert [tuple(names[c][int(v)] for c, v in enumerate(row)) for row in labels] == rows
    assert labels[:, 0].tolist() == [1, 0, 1, 2]


def test_items_through_pk_loader(tmp_path: Path) -> None:
    for c in range(4):
        for i in range(3):
            layouts.jpeg(tmp_path / f"class{c}" / f"{i}.jpg", c * 3 + i, size=(20, 16))
    data = ClassFolderDataset(tmp_path, transform=T.train_transform(8))
    loader = DataLoader(data, batch_sampler=PKSampler(data.labels, p=2, k=2, seed=1))
    batches = list(loader)
    assert len(batches) == 3  # one pass over the 12 images in batches of 4
    for batch in batches:
        assert set(batch) == {"image", "label", "index"}
        assert batch["image"].shape == (4, 3, 8, 8) and batch["image"].dtype == torch.float32
        assert torch.equal(batch["label"], data.labels[batch["index"]])


def test_undecodable_image_stops_naming_its_path_or_is_skipped_for_a_class_mate(tmp_path: Path) -> None:
    for i in range(3):
        layouts.jpeg(tmp_path / "cat" / f"{i}.jpg", i)
    (tmp_path / "cat" / "1.jpg").write_bytes((tmp_path / "cat" / "0.jpg").read_bytes()[:60])  # truncated
    data = ClassFolderDataset(tmp_path)
    with pytest.raises(ValueError, match=f"Could not decode image {tmp_path / 'cat' / '1.jpg'}"):
        data[1]
    data.on_bad_image = "skip"
    with pytest.warns(UserWarning, match=r"skipped \(`on_bad_image: skip`\): Could not decode image .*cat/1\.jpg"):
        item = data[1]
    assert item["index"] == 1 and item["image"].size == load_image(tmp_path / "cat" / "2.jpg").size
    assert list(item["image"].getdata()) == list(load_image(tmp_path / "cat" / "2.jpg").getdata())  # the next one
