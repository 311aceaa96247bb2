"""Run directories on disk: the latest version of a logger, the checkpoint to resume from, an appended ``metrics.csv``.

A run lives in ``<save_dir>/<name>/version_<n>/`` (its logs, ``config.yaml`` and ``checkpoints/``). Resuming it means
finding the newest version, its newest checkpoint (``last.ckpt``, the interruption checkpoint ``interrupted.ckpt`` of
:class:`ranklit.training.FaultTolerance`), and continuing to log into the same version.
"""

from __future__ import annotations

import csv
import re
import warnings
from pathlib import Path
from typing import Any

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.cli import SaveConfigCallback
from lightning.pytorch.loggers import CSVLogger
from typing_extensions import override

__all__ = [
    "RESUMABLE",
    "RunConfigSaver",
    "changed_settings",
    "continue_metrics_csv",
    "latest_checkpoint",
    "latest_version",
    "run_directory",
]

#: The checkpoints a run is resumed from, in its ``checkpoints/`` folder (the newest wins).
RESUMABLE = ("last.ckpt", "interrupted.ckpt")


def latest_version(experiment: str | Path) -> int | None:
    """The highest ``n`` of the ``version_<n>`` folders in ``experiment`` (``<save_dir>/<name>``), or ``None``.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> for n in (0, 2, 10): (root / f"version_{n}").mkdir()
        >>> latest_version(root), latest_version(root / "absent")
        (10, None)
    """
    folder = Path(experiment)
    names = [p.name for p in folder.glob("version_*") if p.is_dir()]
    numbers = [int(m.group(1)) for name in names if (m := re.fullmatch(r"version_(\d+)", name))]
    return max(numbers, default=None)


def latest_checkpoint(folder: str | Path) -> Path | None:
    """The newest (by modification time) of the :data:`RESUMABLE` checkpoints in ``folder``, or ``None``.

    Example:
        >>> import os, tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> for name, time in (("last.ckpt", 2), ("interrupted.ckpt", 1)):
        ...     (folder / name).touch(); os.utime(folder / name, (time, time))
        >>> latest_checkpoint(folder).name
        'last.ckpt'
    """
    candidates = [Path(folder) / name for name in RESUMABLE if (Path(folder) / name).is_file()]
    return max(candidates, key=lambda p: p.stat().st_mtime, default=None)


def changed_settings(saved: dict[str, Any], current: dict[str, Any], prefix: str = "model") -> list[str]:
    """``"key: checkpoint A, config B"`` for every setting in ``saved`` whose value differs in ``current``.

    Example:
        >>> saved = {"head_lr": 1e-4, "net": {"init_args": {"dim": 8}}}
        >>> changed_settings(saved, {"head_lr": 1e-3, "net": {"init_args": {"dim": 8}}})
        ['model.head_lr: checkpoint 0.0001, config 0.001']
    """
    changes = []
    for key in sorted(saved.keys() | current.keys()):
        before, after, name = saved.get(key), current.get(key), f"{prefix}.{key}"
        if isinstance(before, dict) and isinstance(after, dict):
            changes += changed_settings(before, after, name)
        elif _plain(before) != _plain(after):
            changes.append(f"{name}: checkpoint {before!r}, config {after!r}")
    return changes


def _plain(value: Any) -> Any:
    return [_plain(v) for v in value] if isinstance(value, (list, tuple)) else value


def continue_metrics_csv(logger: CSVLogger) -> None:
    """Make a ``CSVLogger`` writing into an existing version append to its ``metrics.csv`` (Lightning's writer
    deletes the file it finds): the rows already there are kept, the new ones follow them."""
    path = Path(logger.log_dir) / "metrics.csv"
    if not path.is_file():
        return
    with path.open(newline="") as file:
        rows = list(csv.DictReader(file))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Experiment logs directory .* exists and is not empty")
        writer = logger.experiment  # created now: it removes the file
    writer.metrics = rows
    writer.save()


def run_directory(trainer: Trainer) -> Path:
    """The directory of a run: ``<save_dir>/<name>/<version>`` of the first logger (as Lightning's
    ``ModelCheckpoint`` resolves it for ``checkpoints/``), or ``default_root_dir`` without a logger."""
    if not trainer.loggers:
        return Path(trainer.default_root_dir)
    logger = trainer.loggers[0]
    version = logger.version if isinstance(logger.version, str) else f"version_{logger.version}"
    return Path(logger.save_dir or trainer.default_root_dir) / str(logger.name) / version


class RunConfigSaver(SaveConfigCallback):
    """Writes the resolved config as ``config.yaml`` into the run's own directory (:func:`run_directory`), so runs
    with loggers that share a ``save_dir`` (wandb) never overwrite each other's config."""

    @override
    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if self.already_saved:
            return
        folder = Path(trainer.strategy.broadcast(str(run_directory(trainer))))
        if trainer.is_global_zero:
            folder.mkdir(parents=True, exist_ok=True)
            text = self.parser.dump(self.config, skip_unset=False)  # nulls kept: the config reproduces the run
            (folder / self.config_filename).write_text(text)
        self.already_saved = trainer.strategy.broadcast(True)
