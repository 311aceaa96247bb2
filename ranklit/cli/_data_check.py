"""``ranklit data check --config CONFIG [--data.root DIR]``: read every image of a config's datasets before training.

The command builds only the ``data`` section of the config (no model, no trainer, nothing downloaded): the datasets
run their index checks (:mod:`ranklit.data.datasets.validation`: missing, empty or twice-listed files, bad CSV rows,
misplaced images; any of them is reported and the command exits with 2). Then every image is decoded, with a
progress bar, and the summary lists, per split, the images and classes, images per class (min / median / max), image
sizes and modes, the unreadable files, then the files of identical content in the training split and an evaluation
split (a leak) and the batch plan (sampler, P × K, batches per epoch, its warnings). Exit code 0 when nothing is
wrong, 2 when an unreadable file, a leak or a sampler error is found.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

import yaml
from lightning.pytorch.cli import LightningArgumentParser

from ranklit.cli._injected import check_injected
from ranklit.data._datamodule import RetrievalDataModule
from ranklit.data._inspection import inspect_split, leaks, report_lines
from ranklit.errors import UserError

__all__ = ["main"]

DATASETS = ("train_dataset", "val_dataset", "test_dataset", "gallery_dataset")


def _datamodule(config: Path, root: str | None) -> RetrievalDataModule:
    section: dict[str, Any] = dict(yaml.safe_load(config.read_text()).get("data") or {})
    if root is not None:
        section["root"] = root
    check_injected({"data": section})  # nothing configured is called before its type is checked
    parser = LightningArgumentParser(exit_on_error=False)
    parser.add_lightning_class_args(RetrievalDataModule, "data")
    for name in DATASETS:
        parser.link_arguments("data.root", f"data.{name}.init_args.root", apply_on="parse")
    try:
        parsed = parser.parse_object({"data": section})
    except Exception as error:  # jsonargparse's ArgumentError: an invalid data section
        raise UserError(f"{config}: the `data` section does not parse: {str(error).splitlines()[0]}") from error
    return parser.instantiate_classes(parsed).data


def _plan(datamodule: RetrievalDataModule) -> tuple[str, bool]:
    train = datamodule.train_dataset
    if train is None or datamodule.batch_sampler is None:
        return "no training set or batch sampler in this config", False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            sampler = datamodule.batch_sampler(train.labels)
        except (ValueError, TypeError) as error:
            return f"PROBLEM: `data.batch_sampler` cannot be built: {error}", True
    p, k, size = (getattr(sampler, name, None) for name in ("p", "k", "batch_size"))
    shape = f"P x K = {p} x {k} = {size} images" if p is not None else f"{size} images"
    text = (
        f"{type(sampler).__name__}, {shape} per batch, {len(sampler)} batches per epoch "  # type: ignore[arg-type]
        f"(the training set has {len(train.labels)} images)"
    )
    return "; ".join([text, *(f"note: {w.message}" for w in caught)]), False


def main(args: list[str]) -> None:
    """``ranklit data check ...`` (``args`` after ``data``); exits with 0 or 2."""
    parser = argparse.ArgumentParser(prog="ranklit data", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["check"])
    parser.add_argument("--config", required=True, type=Path, help="the config whose `data` section is checked")
    parser.add_argument("--data.root", dest="root", default=None, help="the data folder (as for `ranklit fit`)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    options = parser.parse_args(args)
    datamodule = _datamodule(options.config, options.root)
    datasets = {name: getattr(datamodule, name) for name in DATASETS if getattr(datamodule, name) is not None}
    reports = [inspect_split(name, data, not options.no_progress) for name, data in datasets.items()]
    leaked = leaks(reports)
    plan, sampler_problem = _plan(datamodule)
    sys.stdout.write("\n".join(report_lines(reports, leaked, plan)) + "\n")
    problems = sampler_problem or bool(leaked) or any(r.unreadable for r in reports)
    raise SystemExit(2 if problems else 0)
