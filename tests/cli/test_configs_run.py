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

from ranklit.cli import CONFIG_DIR, RanklitCLI
from ranklit.data import CategorySampler, HierarchicalSampler, PKSampler, RetrievalDataModule
from ranklit.models import RetrievalModule
from tests.data import layouts

CONFIGS = sorted(CONFIG_DIR.glob("*.yaml"))
EXPERIMENTS = [c for c in CONFIGS if not c.name.startswith("quickstart")]
MONITORED = {"val/map_at_r", "val/hap", "val/map"}


def _load(config: Path) -> dict[str, Any]:
    return yaml.safe_load(config.read_text())


def _landmarks_csv(root: Path, options: dict[str, Any]) -> None:
    """A ``path,label,split`` CSV (the generic format the listwise-AP config reads) with 3 train and 2 val classes."""
    rows = [(f"img/{c}/{i}.jpg", c, "train" if c < 3 else "val") for c in range(5) for i in range(2)]
    for i, (path, _, _) in enumerate(rows):
        layouts.jpeg(root / path, i)
    lines = ["path,label,split", *(",".join(map(str, row)) for row in rows)]
    (root / str(options.get("csv_file", "dataset.csv"))).write_text("\n".join(lines) + "\n")


FIXTURES: dict[str, Callable[[Path, dict[str, Any]], object]] = {
    "CUB200": lambda root, _: layouts.cub(root, {1: 2, 2: 3, 3: 2, 101: 2, 102: 2}),
    "StanfordOnlineProducts": lambda root, _: layouts.sop(root),
    "INaturalist2018": lambda root, _: layouts.inaturalist(root),
    "InShop": lambda root, _: layouts.inshop(root),
    "VehicleID": lambda root, _: layouts.vehicleid(root),
    "DyML": lambda root, _: layouts.dyml(root),
    "CSVDataset": _landmarks_csv,
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
        "--data.batch_size=4",
        "--data.samples_per_class=2",
        "--data.eval_batch_size=16",
        "--data.num_workers=0",
        "--trainer.accelerator=cpu",
        "--trainer.devices=1",
        "--trainer.fast_dev_run=1",
    ]
    if model.get("multistage_chunk_size"):
        overrides.append("--model.multistage_chunk_size=2")  # 2 chunks per batch: the three stages all run
    return overrides


def _synthetic(data: dict[str, Any]) -> list[str]:
    levels = (data.get("dataset_options") or {}).get("levels", 2)
    options = {"levels": levels, "num_coarse": 2, "fine_per_parent": 4, "images_per_class": 4, "image_size": 32}
    return [f"--data.dataset_options={yaml.safe_dump(options, default_flow_style=True).strip()}"]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_config_runs_one_step_on_its_dataset_format(config: Path, tmp_path: Path, monkeypatch) -> None:
    raw = _load(config)
    data, model = raw["data"], raw["model"]
    monkeypatch.chdir(tmp_path)  # the CSV logger and checkpoints write under ./runs
    monkeypatch.setattr(sys, "argv", ["ranklit"])  # pytest's own arguments are not the CLI's
    if data["dataset"] == "SyntheticHierarchy":
        dataset_args = _synthetic(data)
    else:
        assert data["dataset"] in FIXTURES, f"{config.name}: add a fixture for {data['dataset']} to this test module"
        root = tmp_path / "dataset"
        root.mkdir()
        FIXTURES[data["dataset"]](root, data.get("dataset_options") or {})
        dataset_args = [f"--data.root={root}"]
    args = ["fit", "--config", str(config), *_tiny(model), *dataset_args]
    cli = RanklitCLI(RetrievalModule, RetrievalDataModule, args=args, save_config_kwargs={"overwrite": True})
    assert cli.trainer.global_step == 1
    for callback in raw["trainer"].get("callbacks", []):  # the monitored metric is one the validation logs
        if callback["class_path"].endswith("ModelCheckpoint"):
            assert callback["init_args"]["monitor"] in cli.trainer.callback_metrics
    _check_optimisation(cli, model)
    sampler = cli.trainer.train_dataloader.batch_sampler
    kinds = {"pk": PKSampler, "hierarchical": HierarchicalSampler, "category": CategorySampler}
    assert isinstance(sampler, kinds[data.get("sampler", "pk")])


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
    assert trainer["use_distributed_sampler"] is False, "the ranklit samplers split batches across ranks themselves"
    checkpoints = [c for c in trainer["callbacks"] if c["class_path"].endswith("ModelCheckpoint")]
    assert len(checkpoints) == 1 and checkpoints[0]["init_args"]["monitor"] in MONITORED
    assert checkpoints[0]["init_args"]["mode"] == "max"
    logger = trainer["logger"]
    assert logger["class_path"].endswith("CSVLogger")
    assert (logger["init_args"]["save_dir"], logger["init_args"]["name"]) == ("runs", config.stem)
    assert str(data["root"]).startswith("data/"), "data.root is a placeholder under data/, documented in a comment"
    assert "expected layout" in config.read_text().lower()
    loss_args = model["loss"].get("init_args") or {}
    assert not {"num_classes", "embedding_dim"} & set(loss_args), "linked by the CLI from data and net"
    assert isinstance(model["net"]["init_args"].get("pretrained"), bool)


@pytest.mark.parametrize("config", EXPERIMENTS, ids=lambda p: p.name)
def test_schedule_spans_the_training(config: Path) -> None:
    raw = _load(config)
    epochs, scheduler = raw["trainer"]["max_epochs"], raw["model"].get("lr_scheduler")
    if scheduler is None:
        return
    if raw["model"].get("lr_scheduler_interval", "epoch") == "step":  # the schedule counts optimiser steps
        epochs *= raw["data"]["batches_per_epoch"]
    name, args = scheduler["class_path"].rsplit(".", 1)[1], scheduler["init_args"]
    length = {"CosineAnnealingLR": "T_max", "WarmupCosineLR": "max_epochs", "LinearLR": "total_iters"}
    if name in length:
        assert args[length[name]] == epochs, f"{name} must end with the training ({epochs} epochs or steps)"
    else:
        assert name == "MultiStepLR" and max(args["milestones"]) < epochs
