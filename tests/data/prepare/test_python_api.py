"""``ranklit.data.prepare_dataset``: the preparation as a Python call, the command's twin (no argparse, no exit)."""

from __future__ import annotations

import pytest

from ranklit.data import CUB200, DATASET_CATALOG, PreparedDataset, prepare_dataset
from ranklit.errors import UserError
from tests.data.prepare.helpers import sha256


def test_prepare_dataset_prepares_cub_from_the_test_server_in_python(tmp_path, cub_served, capsys) -> None:
    served, files = cub_served
    root = tmp_path / "CUB_200_2011"
    prepared = prepare_dataset(
        "cub",
        root,
        source=[f"{served.url}/{name}" for name in files],
        sha256=[sha256(content) for content in files.values()],
        progress=False,
    )
    assert isinstance(prepared, PreparedDataset)
    assert prepared.path == root and prepared.data_root == root and not prepared.already_prepared
    assert prepared.configs == DATASET_CATALOG["cub"].configs and "roadmap_cub.yaml" in prepared.configs
    assert prepared.layout[0].startswith("train 8 images, 3 classes")
    assert len(CUB200(root, split="train")) == 8  # the reader loads what was prepared
    # a second call verifies the record and downloads nothing
    again = prepare_dataset("cub", root, source=[f"{served.url}/{name}" for name in files],
                            sha256=[sha256(content) for content in files.values()], progress=False)
    assert again.already_prepared and again.layout == prepared.layout
    assert "--data.root" not in capsys.readouterr().out  # the command's lines are the command's


def test_prepare_dataset_refuses_an_unknown_name_and_a_file_as_root(tmp_path) -> None:
    with pytest.raises(UserError, match="unknown dataset 'cubb': ranklit prepares cub, "):
        prepare_dataset("cubb", tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="is a file; give a folder"):
        prepare_dataset("cub", tmp_path / "file")


def test_one_source_and_one_digest_may_be_given_as_strings(tmp_path, cub_served) -> None:
    """Issue 47: `source="file.tgz"` was read as its characters ("47 --source given") and `sha256="5d97..."` as
    "--sha256 5": one string (or path) is one value."""
    served, files = cub_served
    (name, content), = files.items()
    prepared = prepare_dataset("cub", tmp_path / "cub", source=f"{served.url}/{name}", sha256=sha256(content),
                               progress=False)
    assert len(CUB200(prepared.data_root, split="train")) == 8


def test_bad_python_values_are_refused_in_python_terms(tmp_path) -> None:
    with pytest.raises(UserError) as refused:
        prepare_dataset("cub", tmp_path / "a", sha256="5d97")
    assert "'5d97'" in str(refused.value) and "`sha256=`" in str(refused.value)
    with pytest.raises(UserError) as refused:
        prepare_dataset("cub", tmp_path / "b", source=["a.tgz", "b.tgz"])
    assert "2 source(s) given" in str(refused.value) and "`source=`" in str(refused.value)
    with pytest.raises(TypeError, match=r"`source` takes a string, a path or a list of them; got an item 3 of type"):
        prepare_dataset("cub", tmp_path / "c", source=[3])  # type: ignore[list-item]
