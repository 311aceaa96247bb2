"""CUB-200-2011, Stanford Online Products, iNaturalist 2018, In-Shop and VehicleID on tiny copies of their layouts."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ranklit.data import CUB200, INaturalist2018, InShop, StanfordOnlineProducts, VehicleID
from ranklit.data.images import transforms as T
from tests.data import layouts


def _check_contiguous(labels: torch.Tensor) -> None:
    matrix = labels.reshape(len(labels), -1)
    for column in matrix.T:
        assert torch.equal(torch.unique(column), torch.arange(int(column.max()) + 1))


def _check_hierarchy(labels: torch.Tensor) -> None:
    for fine in torch.unique(labels[:, 0]):
        rows = labels[labels[:, 0] == fine]
        assert (rows == rows[0]).all()


@pytest.mark.parametrize("parent", [False, True])
def test_cub(tmp_path: Path, parent: bool) -> None:
    root = tmp_path / "CUB_200_2011" if parent else tmp_path
    layouts.cub(root, {1: 3, 2: 2, 100: 2, 101: 2, 200: 3})
    train, test = CUB200(tmp_path, "train"), CUB200(tmp_path, "test", transform=T.test_transform(10, 8))
    assert (len(train), len(test)) == (7, 5)
    assert train.labels.shape == (7,) and train.labels.tolist() == [0, 0, 0, 1, 1, 2, 2]
    assert train.class_names == [[1, 2, 100]] and test.class_names == [[101, 200]]
    assert train.num_classes == 3 and test.num_classes == 2
    item = test[4]
    assert item["image"].shape == (3, 8, 8) and item["label"] == 1 and item["index"] == 4
    assert train[0]["image"].mode == "RGB"  # the grayscale JPEG is converted


def test_cub_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"CUB200: folder .*images not found\. Expected layout .*caltech"):
        CUB200(tmp_path)
    layouts.cub(tmp_path, {1: 1})
    (tmp_path / "images" / "Bad_folder").mkdir()
    with pytest.raises(ValueError, match=r"Bad_folder is not named <NNN\.Species_name>"):
        CUB200(tmp_path)
    with pytest.raises(ValueError, match=r"`split` must be one of \('train', 'test'\), got 'val'"):
        CUB200(tmp_path, "val")


def test_sop(tmp_path: Path) -> None:
    lists = layouts.sop(tmp_path)
    train, test = StanfordOnlineProducts(tmp_path, "train"), StanfordOnlineProducts(tmp_path, "test")
    assert len(train) == len(lists["train"]) and len(test) == len(lists["test"])
    assert train.labels.shape == (len(train), 2) and train.num_classes == 3
    _check_contiguous(train.labels)
    _check_hierarchy(train.labels)
    assert set(train.class_names[0]).isdisjoint(test.class_names[0])  # class-disjoint split
    assert train.class_names[1] == test.class_names[1] == [1, 2]  # super-classes shared
    for i, (_, c, s, relative) in enumerate(lists["test"]):
        assert test.paths[i] == tmp_path / relative
        assert test.class_names[0][test.labels[i, 0]] == c and test.class_names[1][test.labels[i, 1]] == s
    assert test[0]["image"].size == (12, 10)


def test_sop_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"Ebay_train\.txt not found.*image_id class_id.*lifted_struct"):
        StanfordOnlineProducts(tmp_path)
    (tmp_path / "Ebay_train.txt").write_text("id class super path\n")
    with pytest.raises(ValueError, match=r"Ebay_train\.txt, line 1: expected the header `image_id class_id"):
        StanfordOnlineProducts(tmp_path)
    (tmp_path / "Ebay_train.txt").write_text("image_id class_id super_class_id path\n1 x 1 a.JPG\n")
    with pytest.raises(ValueError, match="line 2: expected `<image_id> <class_id>"):
        StanfordOnlineProducts(tmp_path)


def test_inaturalist_base_and_full(tmp_path: Path) -> None:
    layouts.inaturalist(tmp_path)
    base = INaturalist2018(tmp_path, "train")
    assert len(base) == 12 and base.labels.shape == (12, 2) and base.num_classes == 4
    assert base.class_names == [[0, 2, 3, 5], ["Aves", "Insecta", "Plantae"]]
    _check_contiguous(base.labels)
    full = INaturalist2018(tmp_path, "train", levels="full")
    assert full.labels.shape == (12, 7)
    _check_hierarchy(full.labels)
    # species 0 and 2 share the genus *name* "Alpha" but not the family: distinct genera, same class (Magnoliopsida)
    rows = {s: full.labels[full.class_names[0].index(s) == full.labels[:, 0]][0] for s in (0, 2, 3, 5)}
    assert rows[0][1] != rows[2][1] and rows[0][4] == rows[2][4]
    assert rows[3][6] == rows[5][6] != rows[0][6]  # kingdom Animalia shared by 3 and 5
    assert full.class_names[6] == [("Animalia",), ("Plantae",)]
    test = INaturalist2018(tmp_path, "test", levels="full")
    assert set(test.class_names[0]).isdisjoint(base.class_names[0])
    (tmp_path / "Inat_dataset_splits").rename(tmp_path / "moved")  # split files directly in root are read too
    (tmp_path / "moved" / "Inaturalist_test_set1.txt").rename(tmp_path / "Inaturalist_test_set1.txt")
    assert INaturalist2018(tmp_path, "test").paths == test.paths


def test_inaturalist_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"train2018\.json not found.*Inat_dataset_splits.*inat_comp"):
        INaturalist2018(tmp_path)
    layouts.inaturalist(tmp_path)
    with pytest.raises(ValueError, match="`levels` must be 'base' or 'full'"):
        INaturalist2018(tmp_path, levels="genus")
    split = tmp_path / "Inat_dataset_splits" / "Inaturalist_test_set1.txt"
    split.write_text(split.read_text() + "train_val2018/Aves/999/x.jpg\n")
    with pytest.raises(ValueError, match=r"Inaturalist_test_set1\.txt, line 7: expected a path <...>/<species id"):
        INaturalist2018(tmp_path, "test")
    (tmp_path / "train2018.json").write_text('{"images": []}')
    with pytest.raises(ValueError, match="is not the iNaturalist 2018 annotation file"):
        INaturalist2018(tmp_path)


@pytest.mark.parametrize("nested", [False, True])
def test_inshop(tmp_path: Path, nested: bool) -> None:
    layouts.inshop(tmp_path, nested=nested)
    train, query, gallery = (InShop(tmp_path, s) for s in ("train", "query", "gallery"))
    assert (len(train), len(query), len(gallery)) == (4, 2, 4)
    assert train.labels.tolist() == [[0, 1], [0, 1], [1, 0], [1, 0]]  # [item, category], ids in sorted order
    assert train.class_names == [["id_00000002", "id_00000007"], ["MEN/Denim", "WOMEN/Dresses"]]
    assert set(train.class_names[0]).isdisjoint(query.class_names[0])
    assert query.class_names == gallery.class_names  # query and gallery share ids
    assert query.labels[:, 0].tolist() == [0, 2] and gallery.labels[:, 0].tolist() == [0, 0, 1, 2]
    assert gallery.paths[0].exists() and query[1]["index"] == 1


def test_inshop_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"list_eval_partition\.txt not found.*DeepFashion"):
        InShop(tmp_path)
    (tmp_path / "list_eval_partition.txt").write_text("1\nimage item status\n")
    with pytest.raises(ValueError, match="line 2: expected the header `image_name item_id evaluation_status`"):
        InShop(tmp_path)
    (tmp_path / "list_eval_partition.txt").write_text("1\nimage_name item_id evaluation_status\na.jpg id_1 val\n")
    with pytest.raises(ValueError, match="line 3: expected `img/<GENDER>/<Category>"):
        InShop(tmp_path)


def test_vehicleid(tmp_path: Path) -> None:
    layouts.vehicleid(tmp_path)
    train = VehicleID(tmp_path, "train")
    assert len(train) == 7 and train.labels.shape == (7, 2) and train.num_classes == 3
    _check_hierarchy(train.labels)
    assert train.labels[:, 1].tolist() == [0, 0, 0, 0, 0, 1, 1]  # vehicles 1, 2: model 5; vehicle 3: its own
    assert train.class_names[1] == [("model", 5), ("none", 3)]
    sizes = {s: len(VehicleID(tmp_path, s)) for s in ("small", "medium", "large")}
    assert sizes == {"small": 2, "medium": 4, "large": 7}
    large = VehicleID(tmp_path, "large")
    assert large.num_classes == 3 and set(large.class_names[0]).isdisjoint(train.class_names[0])
    assert large.paths[0] == tmp_path / "image" / "00000100.jpg"


def test_vehicleid_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"model_attr\.txt not found.*train_list\.txt.*pkuml"):
        VehicleID(tmp_path)
    layouts.vehicleid(tmp_path)
    (tmp_path / "train_test_split" / "train_list.txt").write_text("0001 1\n0002\n")
    with pytest.raises(ValueError, match=r"train_list\.txt, line 2: expected `<image name> <vehicle id>`"):
        VehicleID(tmp_path)
    with pytest.raises(ValueError, match="`split` must be one of"):
        VehicleID(tmp_path, "test")
