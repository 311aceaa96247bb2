"""The real-image benchmark's scripts (benchmarks/real_images) on a tiny fake icon-theme tree: the builder writes a
set that ``CSVDataset`` reads, split by class and the same on every run; the converter maps tensors in order and
refuses a shape that differs; ``compare.py --quick`` trains and evaluates every ranklit row (the peer's row too when
pytorch-metric-learning is installed) and prints the table."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from PIL import Image

from ranklit.data import CSVDataset

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "real_images"


@pytest.fixture(scope="module")
def scripts() -> Iterator[None]:
    sys.path.insert(0, str(BENCH))
    yield
    sys.path.remove(str(BENCH))


def fake_themes(root: Path, names: int = 8) -> None:
    """Every theme of ``build_icons.THEMES`` drawing ``names`` icons (a colour each) in two contexts, plus the files
    the builder must skip: a symbolic icon, a symbolic link, a copy of another theme's drawing."""
    import build_icons

    for t, theme in enumerate(build_icons.THEMES):
        for n in range(names):
            context = "actions" if n % 2 else "devices"
            folder = root / theme / "48x48" / context
            folder.mkdir(parents=True, exist_ok=True)
            Image.new("RGBA", (48, 48), (20 * t, 25 * n, 100, 255)).save(folder / f"icon{n}-x.png")
        Image.new("RGBA", (48, 48), (9, 9, 9, 255)).save(folder / "go-symbolic.png")
        (folder / "alias.png").symlink_to(folder / "icon1-x.png")
    for theme in ("Tango", "mate", "oxygen"):  # one drawing copied by three themes: one image, so no class
        Image.new("RGBA", (48, 48), (1, 2, 3, 255)).save(root / theme / "48x48" / "devices" / "copy.png")


def test_builder_writes_a_class_split_set_csv_dataset_reads_the_same_every_run(scripts: None, tmp_path: Path) -> None:
    import build_icons

    fake_themes(tmp_path / "icons")
    first = build_icons.build(tmp_path / "icons", tmp_path / "a", size=16, min_themes=3, seed=0)
    again = build_icons.build(tmp_path / "icons", tmp_path / "b", size=16, min_themes=3, seed=0)
    assert first["csv_sha256"] == again["csv_sha256"]
    assert first["classes"] == {"train": 4, "test": 4}  # alias, symbolic and the copied `copy` left out
    train, test = (CSVDataset(tmp_path / "a", split, csv_file="dataset.csv") for split in ("train", "test"))
    assert len(train) == len(test) == 4 * len(build_icons.THEMES)
    assert not set(train.class_names[0]) & set(test.class_names[0])
    assert train.labels.shape[1] == 3 and set(train.class_names[2]) | set(test.class_names[2]) == {"actions", "devices"}
    assert "devices/icon0" in test.class_names[1] + train.class_names[1]
    with Image.open(tmp_path / "a" / "images" / "oxygen" / "devices" / "icon0-x.png") as image:
        assert image.mode == "RGB" and image.size == (16, 16)
    other = build_icons.build(tmp_path / "icons", tmp_path / "c", size=16, min_themes=3, seed=1)
    assert other["csv_sha256"] != first["csv_sha256"]  # another seed, another split


def test_builder_names_the_packages_of_missing_themes(scripts: None, tmp_path: Path) -> None:
    import build_icons

    with pytest.raises(SystemExit, match=r"apt-get install .*oxygen-icon-theme"):
        build_icons.build(tmp_path, tmp_path / "out", size=16, min_themes=3, seed=0)


def test_converter_maps_the_tensors_in_order_and_refuses_another_shape(scripts: None) -> None:
    import convert_weights
    import timm

    reference = timm.create_model(convert_weights.ARCHITECTURE).state_dict()
    counter = ".num_batches_tracked"  # the package's names differ but for the batch-norm counters' suffix
    source = {f"_other.{i}{counter if k.endswith(counter) else ''}": v.clone() for i, (k, v) in
              enumerate(reference.items())}
    converted = convert_weights.convert(source)
    assert list(converted) == list(reference)
    assert all(torch.equal(converted[k], reference[k]) for k in reference)
    first = next(iter(source))
    source[first] = torch.zeros(1)
    with pytest.raises(SystemExit, match=r"conv_stem\.weight: shape"):
        convert_weights.convert(source)


def test_compare_quick_trains_every_row_and_prints_the_table(scripts: None, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    import build_icons
    import compare

    fake_themes(tmp_path / "icons")
    build_icons.build(tmp_path / "icons", tmp_path / "set", size=32, min_themes=3, seed=0)
    rows = [*compare.UNTRAINED, "ROADMAPLoss", "SmoothAPLoss", "FastAPLoss", "ContrastiveLoss"]
    if importlib.util.find_spec("pytorch_metric_learning") is not None:
        rows.append("PML MultiSimilarity + miner")
    log = tmp_path / "runs.jsonl"
    compare.main(["--data", str(tmp_path / "set"), "--weights", "none", "--backbone", "test_efficientnet",
                  "--quick", "--set", "image_size=32", "--log", str(log), "--no-cross-check", "--rows", *rows])
    out = capsys.readouterr().out
    for row in rows:
        assert f"| {row} | " in out
    assert len(log.read_text().splitlines()) == len(rows)
    with pytest.raises(ValueError, match="unknown recipe settings"):
        compare.Recipe().changed(tua=0.1)


def test_log_table_names_what_each_run_changed_and_refuses_to_mix_recipes(scripts: None) -> None:
    import dataclasses
    import json

    import log_table
    from _recipe import Recipe

    def line(seed: int, value: float, **changes: object) -> str:
        recipe = dataclasses.asdict(Recipe().changed(**changes))
        return json.dumps({"method": "ROADMAPLoss", "seed": seed, "recipe": recipe, "map_at_r": value, "hap": value,
                           "recall_at_1": value, "recall_at_5": value})

    lines = [line(0, 0.2), line(1, 0.4), line(0, 0.1, tau=0.05)]
    table = log_table.summary(lines, Recipe())
    assert "| ROADMAPLoss | base | 2 | 0.300 ± 0.141 |" in table and "| ROADMAPLoss | tau=0.05 | 1 | 0.100 |" in table
    assert "| ROADMAPLoss | 0.300 ± 0.141 |" in log_table.results(lines[:2])
    with pytest.raises(SystemExit, match="2 recipes"):
        log_table.results(lines)
