"""The deploy surface as solid as fit (issue 40): ``index`` honours a CSV's ``split`` column and refuses paths leaving
its folder, ``search`` leaves a query that the index holds out of its own results, ``Retriever.search`` checks the
tensors it is given, and the deploy commands' mistakes are one line with exit code 2."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch

from ranklit.deploy import Retriever, build_index, load_model
from ranklit.errors import UserError
from tests.cli.cli_cases import drive

from .conftest import Images, Run


@pytest.fixture(scope="module")
def index(run: Run, images: Images, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("surface") / "index"
    build_index(load_model(run.config, run.ckpt), images.gallery, folder, progress=False)
    return folder


def _gallery_files(images: Images) -> list[Path]:
    return sorted(p for p in images.gallery.rglob("*") if p.is_file())


def test_index_of_a_csv_reads_the_split_asked_for_and_refuses_paths_outside_it(
    run: Run, images: Images, tmp_path: Path
) -> None:
    files = _gallery_files(images)[:6]
    shutil.copytree(images.gallery, tmp_path / "data")
    names = [f.relative_to(images.gallery).as_posix() for f in files]
    rows = [f"{name},{i % 2},{'test' if i < 2 else 'train'}" for i, name in enumerate(names)]
    table = tmp_path / "data" / "dataset.csv"
    table.write_text("path,label,split\n" + "\n".join(rows) + "\n")
    model = load_model(run.config, run.ckpt)
    with pytest.raises(UserError, match=r"has a `split` column \('test' x2, 'train' x4\).*--split test"):
        build_index(model, table, tmp_path / "refused", progress=False)
    assert not (tmp_path / "refused").exists()
    card = build_index(model, table, tmp_path / "test", split="test", progress=False)
    assert card["index"]["count"] == 2 and card["index"]["split"] == "test"
    assert [Path(p).name for p in Retriever.from_index(tmp_path / "test").paths] == [Path(n).name for n in names[:2]]
    assert build_index(model, table, tmp_path / "all", split="all", progress=False)["index"]["count"] == 6
    with pytest.raises(UserError, match="no row of split 'gallery'"):
        build_index(model, table, tmp_path / "none", split="gallery", progress=False)
    (tmp_path / "secret.png").write_bytes(files[0].read_bytes())  # beside the CSV's folder, not in it
    table.write_text(f"path,label,split\n{names[0]},0,test\n../secret.png,0,test\n{files[1].resolve()},0,test\n")
    with pytest.raises(UserError, match=r"2 rows whose path leads outside .*line 3 \(\.\./secret\.png\)"):
        build_index(model, table, tmp_path / "outside", split="test", progress=False)


def test_search_leaves_a_query_that_the_index_holds_out_of_its_own_results(index: Path, images: Images) -> None:
    retriever = Retriever.from_index(index)
    query = _gallery_files(images)[3]
    kept = retriever.search(query, k=3)[0]
    assert kept[0].path == str(query.resolve()) and kept[0].score >= 0.999
    left_out = retriever.search([query, images.queries / next(iter(images.originals))], k=3, exclude_self=True)
    assert [h.path for h in left_out[0]] == [h.path for h in retriever.search(query, k=4)[0][1:]]
    assert left_out[1][0].score >= 0.999  # a copy elsewhere is not the same file: its duplicate stays first


def test_query_tensors_are_checked_with_one_clear_error(index: Path, images: Images) -> None:
    retriever = Retriever.from_index(index)
    size = retriever.card["input"]["height"]
    pixels = torch.randint(0, 256, (3, 40, 50), dtype=torch.uint8)
    assert len(retriever.search(pixels, k=2)[0]) == 2
    cases = {
        "float raw pixels": (pixels.float(), r"spans \[0, 255\].*uint8"),
        "channels last": (pixels.permute(1, 2, 0), r"channels last.*permute\(2, 0, 1\)"),
        "batch channels last": (pixels.permute(1, 2, 0)[None], r"permute\(0, 3, 1, 2\)"),
        "int64": (pixels.long(), "dtype torch.int64"),
        "NaN input": (torch.full((1, 3, size, size), float("nan")), "NaN or infinite"),
        "NaN descriptor": (torch.full((2, retriever.dim), float("nan")), "NaN or infinite"),
        "unnormalised descriptor": (torch.ones(2, retriever.dim), "L2-normalise"),
        "inputs of another size": (torch.zeros(1, 3, size + 8, size + 8), "network inputs, whose size"),
        "grey image": (pixels[0], "not an RGB image"),
        "list of a batch": ([pixels[None]], "each must be one image"),
    }
    for name, (query, message) in cases.items():
        with pytest.raises(UserError, match=message):
            retriever.search(query, k=2)
        assert "\n" not in message, name


def test_deploy_mistakes_are_one_line_with_exit_2_and_search_excludes_the_query_itself(
    run: Run, images: Images, index: Path, tmp_path: Path
) -> None:
    (tmp_path / "a_file").write_text("not a folder")
    (tmp_path / "with_split.csv").write_text("path,label,split\nx.png,0,train\n")
    unwritable = tmp_path / "read_only"
    unwritable.mkdir()
    unwritable.chmod(0o555)
    if os.geteuid() == 0:  # root writes anywhere a permission allows: a pseudo file system refuses it too
        unwritable = Path("/sys")
    model = ["--config", str(run.config), "--ckpt_path", str(run.ckpt)]
    build = ["index", *model, "--images", str(images.gallery), "--no-progress"]
    query = ["--query", str(next(images.queries.iterdir()))]
    cases = {
        "export into a read-only folder": (["export", *model, "--format", "torchscript", "--output",
                                            str(unwritable / "model.pt")], "Permission denied"),
        "index --output naming a file": ([*build, "--output", str(tmp_path / "a_file")], "is a file"),
        "index --block_rows 0": ([*build, "--output", str(tmp_path / "new"), "--block_rows", "0"],
                                 "`block_rows` must be a positive integer"),
        "search --whiten_dim too large": (["search", "--index", str(index), *query, "--whiten", "index",
                                           "--whiten_dim", "999"], "must be an integer in [1, 16]"),
        "index of a CSV with splits, none chosen": (["index", *model, "--images", str(tmp_path / "with_split.csv"),
                                                     "--output", str(tmp_path / "new")], "--split test"),
    }
    own = _gallery_files(images)[3]
    searches = [["search", "--index", str(index), "--query", str(own), "--k", "3", *extra]
                for extra in ([], ["--no-exclude_self"])]
    commands = [args for args, _ in cases.values()] + searches
    *results, excluded, kept = drive(commands, Path(__file__).resolve().parents[2], scratch=tmp_path)
    assert excluded["returncode"] == 0 and kept["returncode"] == 0, (excluded["stderr"], kept["stderr"])
    listed = [[line.split()[-1] for line in result["stdout"].splitlines()[1:]] for result in (excluded, kept)]
    assert str(own.resolve()) not in listed[0] and listed[1][0] == str(own.resolve()), listed
    for (name, (_, expected)), result in zip(cases.items(), results, strict=True):
        lines = [line for line in result["stderr"].splitlines() if line.strip()]
        assert result["returncode"] == 2, (name, result["stderr"][-2000:])
        assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], (name, lines)
    assert not (tmp_path / "new").exists()
