"""DyML (shipped CSV quirks, benchmarks per granularity) and Revisited Oxford/Paris (crops, protocols)."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from ranklit.data import DyML
from ranklit.landmarks import RevisitedLandmarks, RevisitedTestSet
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


class _RunsCode:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # what a crafted ground-truth file does: call a function while being unpickled
        return (os.system, (f"touch {self.marker}",))


def test_a_crafted_ground_truth_that_would_run_code_is_refused(tmp_path: Path) -> None:
    data = layouts.revisited(tmp_path)
    marker = tmp_path / "pwned"
    data["gnd"][0]["bbx"] = _RunsCode(marker)
    with (tmp_path / "gnd_roxford5k.pkl").open("wb") as handle:
        pickle.dump(data, handle)
    with pytest.raises(ValueError, match=r"gnd_roxford5k\.pkl is not a revisited-landmarks ground truth.*system"):
        RevisitedLandmarks(tmp_path)
    assert not marker.exists()


def test_ground_truth_with_numpy_arrays_is_read(tmp_path: Path) -> None:
    data = layouts.revisited(tmp_path)
    for entry in data["gnd"]:  # numpy arrays and scalars, as some releases of the files hold
        entry.update({key: np.array(entry[key], dtype=np.int64) for key in ("easy", "hard", "junk")})
        entry["bbx"] = np.array(entry["bbx"])
    with (tmp_path / "gnd_roxford5k.pkl").open("wb") as handle:
        pickle.dump(data, handle)
    query = RevisitedLandmarks(tmp_path, "query")
    assert query.gnd[0] == {"easy": [1, 2], "hard": [3], "junk": [4]} and query.boxes[0] == (2.0, 1.0, 10.0, 7.0)


def test_revisited_test_set_holds_both_benchmarks_at_full_size(tmp_path: Path) -> None:
    for name in ("roxford5k", "rparis6k"):
        layouts.revisited(tmp_path / name, name)
    whitening = RevisitedLandmarks(tmp_path / "rparis6k", "gallery", name="rparis6k")
    data = RevisitedTestSet(tmp_path, max_size=8, whitening_dataset=whitening)
    oxford, paris = data.benchmarks
    assert (oxford.name, oxford.queries, oxford.gallery) == ("roxford5k", range(0, 2), range(2, 8))
    assert (paris.queries, paris.gallery, data.whitening_rows) == (range(8, 10), range(10, 16), range(16, 22))
    assert len(data) == 22 and data.labels.tolist() == [-1] * 22
    assert data[0]["image"].shape == (3, 6, 8) and data[0]["index"] == 0  # 8 x 6 crop kept (not above max_size)
    assert data[2]["image"].shape == (3, 6, 8)  # 16 x 12 gallery image downscaled to a longer side of 8
    assert RevisitedTestSet(tmp_path, names=["rparis6k"], max_size=None)[3]["image"].shape == (3, 12, 16)
    with pytest.raises(ValueError, match="`names` must list distinct benchmarks"):
        RevisitedTestSet(tmp_path, names="roxford5k")
