"""Every dataset of the catalogue prepares from its miniature official archives into a root its readers load and
its config's ``ranklit data check`` accepts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ranklit.cli import main
from ranklit.cli._config_files import resolve_config_paths
from ranklit.data import DATASET_CATALOG as CATALOG
from tests.data.prepare.archives import MINIATURES, tree
from tests.data.prepare.helpers import sha256, source_args
from tests.data.prepare.server import Served, serving
from tests.ddp import scaled_timeout

# the miniatures' test splits have 2 classes, which the readers rightly warn about
pytestmark = pytest.mark.filterwarnings("ignore:.*has 2 classes:UserWarning")


def _small_batches(config: str, folder: Path) -> Path:
    """The shipped ``config`` with the smallest ``p`` of its batch sampler (1 for ``PKSampler``; 2 for the
    hierarchical and category samplers, whose batches take ``p // 2`` classes from each of two groups): the P x K of
    a real dataset does not fit a miniature of a few classes (``data check`` would rightly report it); the data
    section is otherwise the same."""
    shipped = Path(resolve_config_paths(["--config", config])[1])
    tree_ = yaml.safe_load(shipped.read_text())
    if (sampler := tree_["data"].get("batch_sampler")) is not None:
        sampler["init_args"]["p"] = 1 if sampler["class_path"].endswith("PKSampler") else 2
    (folder / config).write_text(yaml.safe_dump(tree_))
    return folder / config


def _images(files: dict[str, bytes], work: Path) -> int:
    """The JPEG files inside the miniature archives (read with the standard library, not by ranklit)."""
    count = 0
    for name, content in files.items():
        (work / name).write_bytes(content)
        if name.endswith((".tgz", ".tar.gz", ".tar")):
            import tarfile

            with tarfile.open(work / name) as bundle:
                count += sum(m.name.lower().endswith(".jpg") for m in bundle.getmembers())
        elif name.endswith(".zip"):
            import zipfile

            with zipfile.ZipFile(work / name) as bundle:
                count += sum(n.lower().endswith(".jpg") for n in bundle.namelist())
    return count


@pytest.mark.parametrize("name", [n for n in CATALOG if n != "r1m"])
def test_each_dataset_prepares_from_its_official_archives_and_its_config_checks(name, tmp_path, capsys) -> None:
    entry = CATALOG[name]
    files = MINIATURES[name](tmp_path / "build")
    root = tmp_path / "data" / entry.folder
    with serving(Served(files={f"/{n}": content for n, content in files.items()})) as served:
        main(["data", "prepare", name, "--root", str(root), "--no-progress", *source_args(served, files)])
    out = capsys.readouterr().out
    target = root / entry.subfolder if entry.subfolder else root
    assert f"--data.root {root}\n" in out
    assert all(config in out for config in entry.configs)
    (tmp_path / "count").mkdir()
    assert len([p for p in target.rglob("*") if p.suffix.lower() == ".jpg"]) == _images(files, tmp_path / "count")
    record = json.loads((target / "ranklit-prepared.json").read_text())
    assert record["dataset"] == name
    assert [a["sha256"] for a in record["archives"]] == [sha256(files[a.filename]) for a in entry.archives]
    assert not list(root.parent.glob(".*")), "staging and download folders are removed"
    if entry.subfolder:  # revisited_eval.yaml reads both Revisited sets under one root
        return
    config = _small_batches(entry.configs[0], tmp_path)
    with pytest.raises(SystemExit) as stop:
        main(["data", "check", "--config", str(config), "--data.root", str(root), "--no-progress"])
    assert stop.value.code == 0, capsys.readouterr().out


def test_inaturalist_gets_the_unobfuscated_taxonomy(tmp_path, capsys) -> None:
    files = MINIATURES["inaturalist"](tmp_path / "build")
    with serving(Served(files={f"/{n}": content for n, content in files.items()})) as served:
        main(["data", "prepare", "inaturalist", "--root", str(tmp_path / "inat"), *source_args(served, files)])
    named = json.loads((tmp_path / "build" / "train2018.json").read_text())["categories"]  # written by the layout
    assert json.loads((tmp_path / "inat" / "train2018.json").read_text())["categories"] == named


def test_revisited_oxford_and_paris_in_one_root_pass_the_check_of_revisited_eval(tmp_path, capsys) -> None:
    root = tmp_path / "revisited"
    for name in ("roxford5k", "rparis6k"):
        files = MINIATURES[name](tmp_path / name)
        with serving(Served(files={f"/{n}": content for n, content in files.items()})) as served:
            main(["data", "prepare", name, "--root", str(root), "--no-progress", *source_args(served, files)])
    assert sorted(p.name for p in (root / "rparis6k" / "jpg").iterdir()) == [f"rparis6k_img_{i}.jpg" for i in range(6)]
    with pytest.raises(SystemExit) as stop:
        main(["data", "check", "--config", "revisited_eval.yaml", "--data.root", str(root), "--no-progress"])
    assert stop.value.code == 0


def test_r1m_from_a_folder_of_its_101_files_gives_a_csv_of_every_distractor(tmp_path, capsys) -> None:
    folder = tmp_path / "downloaded"
    folder.mkdir()
    for name, content in MINIATURES["r1m"](tmp_path / "build").items():
        (folder / name).write_bytes(content)
    main(["data", "prepare", "r1m", "--root", str(tmp_path / "revisited"), "--source", str(folder)])
    out = capsys.readouterr().out
    assert out.count("no digest is published") == 101
    prepared = tmp_path / "revisited" / "revisitop1m"
    listed = (folder / "revisitop1m.txt").read_text().split()
    rows = (prepared / "r1m.csv").read_text().splitlines()
    assert rows[0] == "path,label" and [r.split(",")[0] for r in rows[1:]] == [f"jpg/{n}" for n in listed]
    assert all((prepared / "jpg" / n).is_file() for n in listed)
    assert sorted(folder.iterdir()) == sorted(folder / n for n in tree(folder)), "the user's files are kept"


@pytest.mark.slow
def test_the_command_prepares_cub_from_a_local_server_then_data_check_accepts_it(tmp_path, cub_served) -> None:
    """The whole path a user takes, as subprocesses: prepare, then ``ranklit data check`` with the config."""
    served, files = cub_served
    root = tmp_path / "CUB_200_2011"
    command = [sys.executable, "-m", "ranklit.cli", "data", "prepare", "cub", "--root", str(root)]
    done = subprocess.run(
        [*command, *source_args(served, files)], capture_output=True, text=True, timeout=scaled_timeout(120)
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == [
        f"--data.root {root}",
        f"configs: roadmap_cub.yaml, roadmap_deit_cub.yaml, e.g. `ranklit data check --config roadmap_cub.yaml "
        f"--data.root {root}`",
    ]
    check = [sys.executable, "-m", "ranklit.cli", "data", "check", "--config", "roadmap_cub.yaml", "--data.root",
             str(root), "--no-progress"]
    done = subprocess.run(check, capture_output=True, text=True, timeout=scaled_timeout(120))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "train: 8 images, 3 classes" in done.stdout
