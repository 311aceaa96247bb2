"""Private Lightning and torchmetrics API is used in ``ranklit/_compat/`` only.

The private names are read off live Lightning and torchmetrics objects (a trainer and its loops, a module, a
datamodule, a callback, a checkpoint callback, a CSV logger, the CLI class, a metric), so the check follows the
installed versions. Every other module of the package is parsed, and any attribute access ``x._name`` or method
override ``def _name`` whose name is one of those private names fails the test, naming the file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.loggers import CSVLogger
from torchmetrics import Metric

import ranklit

PACKAGE = Path(ranklit.__file__).parent
COMPAT = PACKAGE / "_compat"


class _Sum(Metric):
    def __init__(self) -> None:
        super().__init__()
        self.add_state("total", default=torch.tensor(0.0), dist_reduce_fx="sum")

    def update(self, value: torch.Tensor) -> None:
        self.total += value

    def compute(self) -> torch.Tensor:
        return self.total


def _private_names(tmp_path: Path) -> set[str]:
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False, accelerator="cpu")
    objects = [
        trainer,
        trainer.fit_loop,
        trainer.fit_loop.epoch_loop,
        trainer.strategy,
        L.LightningModule(),
        L.LightningDataModule(),
        L.Callback(),
        ModelCheckpoint(dirpath=tmp_path),
        CSVLogger(tmp_path),
        LightningCLI,
        _Sum(),
    ]
    names = {name for obj in objects for name in dir(obj)}
    return {name for name in names if name.startswith("_") and not name.startswith("__")}


def _uses(path: Path, private: set[str]) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Attribute) and node.attr in private:
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: .{node.attr}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in private:
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: def {node.name}")
    return found


def test_private_api_only_in_the_compatibility_module(tmp_path: Path) -> None:
    private = _private_names(tmp_path)
    assert {"_trainer", "_is_synced", "_data_fetcher"} <= private  # the scan sees what it must
    outside = [path for path in sorted(PACKAGE.rglob("*.py")) if COMPAT not in path.parents]
    found = [use for path in outside for use in _uses(path, private)]
    assert not found, "private Lightning/torchmetrics API outside ranklit/_compat/:\n" + "\n".join(found)


def test_the_scan_finds_a_private_access(tmp_path: Path) -> None:
    private = _private_names(tmp_path)
    for module in ("lightning.py", "torchmetrics.py"):  # the compatibility module reads them: the scan sees it
        assert _uses(COMPAT / module, private)
