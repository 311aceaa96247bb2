"""``ImageFiles``: the images of a folder at any depth, or of a CSV's ``path`` column, with the readers' checks."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from ranklit.data import ImageFiles
from ranklit.data.datasets.validation import DatasetError


def _image(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), (len(path.name) * 20, 0, 0)).save(path)


def test_folder_at_any_depth_skips_hidden_and_other_files(tmp_path: Path) -> None:
    for name in ("z.png", "a/b/c.jpg", "a/d.PNG", ".hidden/e.png", "a/._f.png"):
        _image(tmp_path / name)
    (tmp_path / "notes.txt").write_text("not an image")
    data = ImageFiles(tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in data.paths] == ["a/b/c.jpg", "a/d.PNG", "z.png"]
    assert data.labels.tolist() == [0, 0, 0] and data[2]["index"] == 2


def test_csv_lists_its_path_column_and_reports_missing_files_at_once(tmp_path: Path) -> None:
    _image(tmp_path / "x" / "1.png")
    _image(tmp_path / "2.png")
    (tmp_path / "list.csv").write_text("label,path\ncat,x/1.png\ndog,2.png\n")
    assert [p.name for p in ImageFiles(tmp_path, csv_file="list.csv").paths] == ["1.png", "2.png"]
    (tmp_path / "bad.csv").write_text("path\nx/1.png\ngone.png\nx/1.png\n")
    with pytest.raises(DatasetError) as error:
        ImageFiles(tmp_path, csv_file="bad.csv")
    assert "line 3 (gone.png)" in str(error.value) and "line 4 (x/1.png)" in str(error.value)  # both, at once
    (tmp_path / "nopath.csv").write_text("file\nx/1.png\n")
    with pytest.raises(ValueError, match="a header with a `path` column"):
        ImageFiles(tmp_path, csv_file="nopath.csv")


def test_csv_split_column_is_asked_for_and_paths_stay_inside_the_folder(tmp_path: Path) -> None:
    for name in ("a.png", "b.png", "c.png"):
        _image(tmp_path / "data" / name)
    _image(tmp_path / "outside.png")
    table = tmp_path / "data" / "list.csv"
    table.write_text("path,label,split\na.png,0,train\nb.png,1,test\nc.png,1,test\n")
    with pytest.raises(DatasetError, match=r"has a `split` column \('test' x2, 'train' x1\)"):
        ImageFiles(tmp_path / "data", csv_file="list.csv")
    assert [p.name for p in ImageFiles(tmp_path / "data", "test", csv_file="list.csv").paths] == ["b.png", "c.png"]
    assert len(ImageFiles(tmp_path / "data", "all", csv_file="list.csv")) == 3
    with pytest.raises(DatasetError, match="no row of split 'val'"):
        ImageFiles(tmp_path / "data", "val", csv_file="list.csv")
    with pytest.raises(DatasetError, match="a folder of images, which has no splits"):
        ImageFiles(tmp_path / "data", "test")
    table.write_text(f"path\na.png\n../outside.png\n{tmp_path / 'outside.png'}\n")
    with pytest.raises(DatasetError, match=r"2 rows whose path leads outside .*line 3 \(\.\./outside\.png\)"):
        ImageFiles(tmp_path / "data", csv_file="list.csv")
    with pytest.raises(DatasetError, match="has no `split` column"):
        ImageFiles(tmp_path / "data", "test", csv_file="list.csv")
