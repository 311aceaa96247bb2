"""DyML (shipped CSV quirks, benchmarks per granularity) and Revisited Oxford/Paris (crops, protocols)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ranklit.data import DyML, RevisitedLandmarks
from tests.data import layouts


@pytest.mark.parametrize("glued", [True, False])
def test_dyml_train_and_product_test(tmp_path: Path, glued: bool) -> None:
    layouts.dyml(tmp_path, glued=glued)
    train = DyML(tmp_path, "train")
    assert len(train) == 8 and train.labels.shape == (8, 3)  # the row glued to the header is kept
    assert train.class_names == [[10, 11, 12, 13], [20, 21], [30]]  # matched by column name, not position
    assert train.labels[:, 0].tolist() == [0, 0, 1, 1, 2, 2, 3, 3] and train.labels[:, 1].tolist() == [0] * 4 + [1] * 4
    assert train.paths[0] == tmp_path / "train" / "imgs" / "0.jpg" and train[7]["image"].size == (12, 10)
    test = DyML(tmp_path, "test")
    assert test.labels.shape == (4, 3) and test.paths[3] == tmp_path / "mini-bmk_all_in_one" / "imgs" / "3.jpg"


@pytest.mark.parametrize("glued", [True, False])
@pytest.mark.parametrize("granularity", ["fine", "coarse"])
def test_dyml_benchmarks(tmp_path: Path, glued: bool, granularity: str) -> None:
    layouts.dyml(tmp_path, glued=glued)
    query = DyML(tmp_path, "query", granularity=granularity)
    gallery = DyML(tmp_path, "gallery", granularity=granularity)
    assert query.labels.shape == (2,) and gallery.labels.shape == (4,)
    assert query.class_names == gallery.class_names == [[5, 6, 9]]
    assert query.labels.tolist() == [0, 1] and gallery.labels.tolist() == [1, 0, 0, 2]
    assert gallery.paths[3] == tmp_path / f"bmk_{granularity}" / "gallery" / "3.jpg"


def test_dyml_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"train/label\.csv not found.*fname, fine_id.*DynamicMetricLearning"):
        DyML(tmp_path)
    layouts.dyml(tmp_path)
    with pytest.raises(ValueError, match="`granularity` must be"):
        DyML(tmp_path, "query", granularity="finest")
    (tmp_path / "train" / "label.csv").write_text("fname, fine_id, middle_id\n0.jpg, 1, 2\n")
    with pytest.raises(ValueError, match=r"label\.csv, line 1: expected the header `fname, fine_id, middle_id, coarse"):
        DyML(tmp_path)
    bad_row = "fname, fine_id, middle_id, coarse_id\n0.jpg, 1, 2, 3\n1.jpg, 1, x, 3\n"
    (tmp_path / "train" / "label.csv").write_text(bad_row)
    with pytest.raises(ValueError, match="line 3: expected 4 fields"):
        DyML(tmp_path)
    (tmp_path / "bmk_fine" / "query.csv").write_text("path, labels\n")
    with pytest.raises(ValueError, match=r"query\.csv, line 1: expected a header of column names"):
        DyML(tmp_path, "query")


def test_revisited_query_crops_and_gallery(tmp_path: Path) -> None:
    data = layouts.revisited(tmp_path)
    query, gallery = RevisitedLandmarks(tmp_path, "query"), RevisitedLandmarks(tmp_path, "gallery")
    assert (len(query), len(gallery)) == (2, 6)
    assert query[0]["image"].size == (8, 6) and query[1]["image"].size == (5, 5)  # cropped to bbx
    assert gallery[0]["image"].size == (16, 12)
    assert query.labels.tolist() == [0, 1] and gallery.labels.tolist() == [-1] * 6
    assert query.gnd[0] == {k: data["gnd"][0][k] for k in ("easy", "hard", "junk")}
    paris = tmp_path / "paris"
    layouts.revisited(paris, "rparis6k")
    assert len(RevisitedLandmarks(paris, "gallery", name="rparis6k")) == 6


@pytest.mark.parametrize(
    ("protocol", "positives", "junk"),
    [("easy", [1, 2], [3, 4]), ("medium", [1, 2, 3], [4]), ("hard", [3], [1, 2, 4])],
)
def test_revisited_protocols(tmp_path: Path, protocol: str, positives: list[int], junk: list[int]) -> None:
    layouts.revisited(tmp_path)
    positive_mask, junk_mask = RevisitedLandmarks(tmp_path).ground_truth(protocol)
    assert positive_mask.shape == junk_mask.shape == (2, 6)
    assert positive_mask[0].nonzero().flatten().tolist() == positives
    assert junk_mask[0].nonzero().flatten().tolist() == junk
    assert not (positive_mask & junk_mask).any()
    expected_second = [5] if protocol != "hard" else []
    assert positive_mask[1].nonzero().flatten().tolist() == expected_second


def test_revisited_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"gnd_roxford5k\.pkl not found.*revisitop"):
        RevisitedLandmarks(tmp_path)
    layouts.revisited(tmp_path)
    with pytest.raises(ValueError, match="`name` must be 'roxford5k' or 'rparis6k'"):
        RevisitedLandmarks(tmp_path, name="oxford5k")
    with pytest.raises(ValueError, match="`protocol` must be one of"):
        RevisitedLandmarks(tmp_path).ground_truth("all")
    (tmp_path / "gnd_roxford5k.pkl").write_bytes(b"not a pickle")
    with pytest.raises(ValueError, match=r"gnd_roxford5k\.pkl is not a revisited-landmarks ground truth"):
        RevisitedLandmarks(tmp_path)
