"""What a newcomer still met in the deploy commands (issue 47, item 7), through the ``ranklit`` command: an export
named for the other format, the advice of an undecodable image outside a training set, ``--exclude_self false``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ranklit.deploy import Retriever, build_index, export_model, load_model
from ranklit.errors import UserError
from tests.cli.cli_cases import drive
from tests.deploy.conftest import Images, Run

REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def index(run: Run, images: Images, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("newcomer_deploy") / "index"
    build_index(load_model(run.config, run.ckpt), images.gallery, folder, progress=False)
    return folder


def _truncated(images: Images, folder: Path) -> Path:
    """A copy of the gallery whose first PNG is cut in half (Pillow cannot decode it)."""
    shutil.copytree(images.gallery, folder)
    cut = sorted(folder.rglob("*.png"))[0]
    cut.write_bytes(cut.read_bytes()[: len(cut.read_bytes()) // 2])
    return cut


def test_deploy_cases_through_the_command(run: Run, images: Images, index: Path, tmp_path: Path) -> None:
    model = ["--config", str(run.config), "--ckpt_path", str(run.ckpt)]
    cut = _truncated(images, tmp_path / "gallery")
    own = next(images.queries.iterdir())
    search = ["search", "--index", str(index), "--query", str(images.originals[own.name]), "--k", "3"]
    cases = {
        "torchscript as .onnx": ["export", *model, "--format", "torchscript", "--output", str(tmp_path / "m.onnx")],
        "onnx as .pt": ["export", *model, "--format", "onnx", "--output", str(tmp_path / "m.pt")],
        "index of a truncated image": ["index", *model, "--images", str(tmp_path / "gallery"), "--output",
                                       str(tmp_path / "new_index"), "--no-progress"],
        "search with a truncated query": ["search", "--index", str(index), "--query", str(cut)],
        "exclude_self false": [*search, "--exclude_self", "false"],
        "no-exclude_self": [*search, "--no-exclude_self"],
    }
    results = dict(zip(cases, drive(list(cases.values()), REPOSITORY, scratch=tmp_path), strict=True))
    for name in ("torchscript as .onnx", "onnx as .pt", "index of a truncated image", "search with a truncated query"):
        result = results[name]
        assert result["returncode"] == 2 and "Traceback" not in result["stderr"], (name, result["stderr"][-3000:])
        assert result["stderr"].count("error: ") == 1, (name, result["stderr"])
    onnx = results["torchscript as .onnx"]["stderr"]
    assert "m.onnx is named as an ONNX file but `--format` is torchscript: write `--output m.pt`, or `--format onnx`" \
        in onnx, onnx
    assert "is named as a TorchScript file but `--format` is onnx: write `--output m.onnx`" \
        in results["onnx as .pt"]["stderr"]
    assert not (tmp_path / "m.onnx").exists() and not (tmp_path / "m.pt").exists()  # refused before writing
    for name in ("index of a truncated image", "search with a truncated query"):
        line = results[name]["stderr"]
        assert f"Could not decode image {cut}" in line and "Re-extract or remove this file." in line, line
        assert "on_bad_image" not in line and "training set" not in line, line  # no such setting for these commands
    excluded, kept = results["exclude_self false"], results["no-exclude_self"]
    assert excluded["returncode"] == 0 and excluded["stdout"] == kept["stdout"], (excluded, kept)


def test_retriever_and_export_model_in_python(run: Run, images: Images, index: Path, tmp_path: Path) -> None:
    cut = _truncated(images, tmp_path / "gallery")
    with pytest.raises(UserError) as refused:
        Retriever.from_index(index).search([str(cut)], k=3)
    assert "Could not decode image" in str(refused.value) and "on_bad_image" not in str(refused.value)
    with pytest.raises(UserError, match="is named as an ONNX file but `--format` is torchscript"):
        export_model(load_model(run.config, run.ckpt), tmp_path / "model.ONNX", "torchscript")
