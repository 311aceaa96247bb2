"""Every config in ``configs/`` follows the house conventions and trains one step on a tiny copy of its dataset.

Each experiment config runs ``ranklit fit --trainer.fast_dev_run=1`` against a fixture in its dataset's official
on-disk layout (the builders of ``tests/data/layouts.py``), with its own sampler, loss, optimiser, schedule and
module options, and only the scale shrunk: a tiny timm backbone (``test_resnet``, ``test_vit`` for DeiT configs),
no pretrained weights, 32-pixel images, batches of 2 classes × 2 images. The quick-start configs run on the built-in
synthetic hierarchy. A config whose dataset has no fixture here fails, so a new dataset needs one.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from ranklit.cli import RanklitCLI
from ranklit.cli._config_files import config_dir
from ranklit.data import CategorySampler, HierarchicalSampler, PKSampler, RetrievalDataModule
from ranklit.models import RetrievalModule
from tests.data import layouts
from tests.tiny import SMALL

CONFIGS = sorted(config_dir().glob("*.yaml"))
EVALUATIONS = [c for c in CONFIGS if yaml.safe_load(c.read_text())["data"].get("train_dataset") is None]
EXPERIMENTS = [c for c in CONFIGS if not c.name.startswith("quickstart") and c not in EVALUATIONS]
MONITORED = {"val/map_at_r", "val/hap", "val/map"}
DATASETS = ("train_dataset", "val_dataset", "test_dataset", "gallery_dataset")


def _load(config: Path) -> dict[str, Any]:
    return yaml.safe_load(config.read_text())


def _dataset_class(data: dict[str, Any]) -> str:
    return str(data["train_dataset"]["class_path"]).rsplit(".", 1)[1]


def _csv(root: Path, data: dict[str, Any]) -> None:
    """A ``path,label,split`` CSV (the generic format) with 3 classes in the training split, 2 in the other one."""
    options = data["train_dataset"]["init_args"]
    other = data["val_dataset"]["init_args"]["split"]
    rows = [(f"img/{c}/{i}.jpg", c, options["split"] if c < 3 else other) for c in range(5) for i in range(2)]
    for i, (path, _, _) in enumerate(rows):
        layouts.jpeg(root / path, i)
    lines = ["path,label,split", *(",".join(map(str, row)) for row in rows)]
    (root / str(options.get("csv_file", "dataset.csv"))).write_text("\n".join(lines) + "\n")


def _class_folders(root: Path, data: dict[str, Any]) -> None:
    """One folder per class (6 classes of 2 images), split by class by the datasets' `train_fraction`."""
    for c in range(6):
        for i in range(2):
            layouts.jpeg(root / f"class{c}" / f"{i}.jpg", 2 * c + i)


FIXTURES: dict[str, Callable[[Path, dict[str, Any]], object]] = {
    "CUB200": lambda root, _: layouts.cub(root, {1: 2, 2: 3, 3: 2, 101: 2, 102: 2}),
    "StanfordOnlineProducts": lambda root, _: layouts.sop(root),
    "INaturalist2018": lambda root, _: layouts.inaturalist(root),
    "InShop": lambda root, _: layouts.inshop(root),
    "VehicleID": lambda root, _: layouts.vehicleid(root),
    "DyML": lambda root, _: layouts.dyml(root),
    "CSVDataset": _csv,
    "ClassFolderDataset": _class_folders,
}


def _tiny(model: dict[str, Any]) -> list[str]:
    """The config at toy scale: tiny backbone, 32-px images, 2 × 2 batches, one step, CPU."""
    backbone = str(model["net"]["init_args"].get("backbone", ""))
    overrides = [
        f"--model.net.init_args.backbone={'test_vit' if 'deit' in backbone or 'vit' in backbone else 'test_resnet'}",
        "--model.net.init_args.pretrained=false",
        "--data.image_size=32",
        "--data.resize_size=32",
        "--data.crop_size=32",
        "--data.batch_sampler.init_args.p=2",
        "--data.batch_sampler.init_args.k=2",
        "--data.eval_batch_size=16",
        "--data.num_workers=0",
        "--trainer.accelerator=cpu",
        "--trainer.devices=1",
        "--trainer.fast_dev_run=1",
    ]
    if model.get("multistage"):
        overrides.append("--model.multistage.init_args.chunk_size=2")  # 2 chunks per batch: the three stages all run
    return overrides


def _synthetic(data: dict[str, Any]) -> list[str]:
    levels = data["train_dataset"]["init_args"].get("levels", 2)
    options = {**SMALL, "levels": levels, "images_per_class": 4}
    return [f"--data.{name}.init_args.{key}={value}" for name in DATASETS if data.get(name) for key, value in
            options.items()]


@pytest.mark.parametrize("config", EVALUATIONS, ids=lambda p: p.name)
def test_evaluation_config_tests_on_its_dataset_format(config: Path, tmp_path: Path, monkeypatch) -> None:
    """Configs without a training set (test-only, e.g. revisited_eval.yaml) run `ranklit test` on a tiny copy."""
    raw = _load(config)
    monkeypatch.chdir(tmp_path)
    test_set = raw["data"]["test_dataset"]
    assert test_set["class_path"] == "ranklit.landmarks.RevisitedTestSet", f"{config.name}: add a fixture for it"
    for name in test_set["init_args"]["names"]:
        layouts.revisited(tmp_path / "data" / name, name)
    args = ["test", "--config", str(config), "--data.root=data", "--model.net.init_args.backbone=test_resnet",
            "--data.num_workers=0", "--trainer.accelerator=cpu", "--model.landmarks.init_args.postprocess=[]"]
    monkeypatch.setattr(sys, "argv", ["ranklit", *args])
    cli = RanklitCLI(RetrievalModule, RetrievalDataModule, save_config_kwargs={"overwrite": True})
    logged = cli.trainer.callback_metrics
    for name in test_set["init_args"]["names"]:
        assert {f"test/{name}/{p}/map" for p in ("easy", "medium", "hard")} <= set(logged)


@pytest.mark.parametrize("config", [c for c in CONFIGS if c not in EVALUATIONS], ids=lambda p: p.name)
def test_config_runs_one_step_on_its_dataset_format(config: Path, tmp_path: Path, monkeypatch) -> None:
    raw = _load(config)
    data, model = raw["data"], raw["model"]
    monkeypatch.chdir(tmp_path)  # the CSV logger and checkpoints write under ./runs
    name = _dataset_class(data)
    if name == "SyntheticHierarchy":
        dataset_args = _synthetic(data)
    else:
        assert name in FIXTURES, f"{config.name}: add a fixture for {name} to this test module"
        root = tmp_path / "dataset"
        root.mkdir()
        FIXTURES[name](root, data)
        dataset_args = [f"--data.root={root}"]
    # `enable_checkpointing false` (a fast_dev_run saves nothing anyway): accepted beside the config's ModelCheckpoint
    args = ["fit", "--config", str(config), *_tiny(model), *dataset_args, "--trainer.enable_checkpointing=false"]
    monkeypatch.setattr(sys, "argv", ["ranklit", *args])
    cli = RanklitCLI(RetrievalModule, RetrievalDataModule, save_config_kwargs={"overwrite": True})
    assert cli.trainer.global_step == 1
    assert not cli.trainer.checkpoint_callbacks and not list(tmp_path.rglob("*.ckpt"))
    for callback in raw["trainer"].get("callbacks", []):  # the monitored metric is one the validation logs
        if callback["class_path"].endswith("ModelCheckpoint"):
            assert callback["init_args"]["monitor"] in cli.trainer.callback_metrics
    _check_optimisation(cli, model)
    sampler = cli.trainer.train_dataloader.batch_sampler
    kinds = {"PKSampler": PKSampler, "HierarchicalSampler": HierarchicalSampler, "CategorySampler": CategorySampler}
    assert isinstance(sampler, kinds[data["batch_sampler"]["class_path"].rsplit(".", 1)[1]])


def _check_optimisation(cli: RanklitCLI, model: dict[str, Any]) -> None:
    """The optimiser, its per-group rates (backbone, head, proxies) and the scheduler are those of the config."""
    optimizer = cli.trainer.optimizers[0]
    expected = model["optimizer"]["init_args"]
    assert type(optimizer).__name__ == model["optimizer"]["class_path"].rsplit(".", 1)[1]
    rates = {"backbone": expected["lr"], "head": model.get("head_lr"), "loss": model.get("loss_lr")}
    for group in optimizer.param_groups:
        base_rate = group.get("initial_lr", group["lr"])  # schedulers keep the configured rate as `initial_lr`
        assert base_rate == pytest.approx(rates[group["name"]] or expected["lr"]), group["name"]
        assert group["weight_decay"] == pytest.approx(expected.get("weight_decay", 0.0))
    schedulers = [config.scheduler for config in cli.trainer.lr_scheduler_configs]
    if model.get("lr_scheduler") is None:
        assert not schedulers
    else:
        assert [type(s).__name__ for s in schedulers] == [model["lr_scheduler"]["class_path"].rsplit(".", 1)[1]]


@pytest.mark.parametrize("config", EXPERIMENTS, ids=lambda p: p.name)
def test_experiment_config_conventions(config: Path) -> None:
    raw = _load(config)
    trainer, model, data = raw["trainer"], raw["model"], raw["data"]
    assert "use_distributed_sampler" not in trainer, "the ranklit CLI's default (false) serves every config"
    checkpoints = [c for c in trainer["callbacks"] if c["class_path"].endswith("ModelCheckpoint")]
    assert len(checkpoints) == 1 and checkpoints[0]["init_args"]["monitor"] in MONITORED
    assert checkpoints[0]["init_args"]["mode"] == "max"
    logger = trainer["logger"]
    assert logger["class_path"].endswith("CSVLogger")
    assert (logger["init_args"]["save_dir"], logger["init_args"]["name"]) == ("runs", config.stem)
    assert str(data["root"]).startswith("data/"), "data.root is a placeholder under data/, documented in a comment"
    assert "expected layout" in config.read_text().lower()
    loss_args = model["loss"].get("init_args") or {}
    assert not {"num_classes", "embedding_dim"} & set(loss_args), "set at fit time from the training set and net"
    assert isinstance(model["net"]["init_args"].get("pretrained"), bool)


@pytest.mark.parametrize("config", EXPERIMENTS, ids=lambda p: p.name)
def test_schedule_spans_the_training(config: Path) -> None:
    raw = _load(config)
    epochs, scheduler = raw["trainer"]["max_epochs"], raw["model"].get("lr_scheduler")
    if scheduler is None:
        return
    if raw["model"].get("lr_scheduler_interval", "epoch") == "step":  # the schedule counts optimiser steps
        epochs *= raw["data"]["batch_sampler"]["init_args"]["batches_per_epoch"]
    name, args = scheduler["class_path"].rsplit(".", 1)[1], scheduler["init_args"]
    length = {"CosineAnnealingLR": "T_max", "WarmupCosineLR": "max_epochs", "LinearLR": "total_iters"}
    if name in length:
        assert args[length[name]] == epochs, f"{name} must end with the training ({epochs} epochs or steps)"
    else:
        assert name == "MultiStepLR" and max(args["milestones"]) < epochs
