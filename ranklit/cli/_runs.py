"""Run directories on disk: the latest version of a logger, the checkpoint to resume from, an appended ``metrics.csv``.

A run lives in ``<save_dir>/<name>/version_<n>/`` (its logs, ``config.yaml`` and ``checkpoints/``). Resuming it means
finding the newest version that has a resumable checkpoint (``ranklit test``/``predict`` create versions without
any), its most advanced checkpoint that loads and is complete (``last.ckpt`` and its rotated predecessors
``last-<n>.ckpt`` of :class:`ranklit.callbacks.RunCheckpoint`, the interruption checkpoint ``interrupted.ckpt`` of
:class:`ranklit.callbacks.FaultTolerance`), and continuing to log into the same version, without the rows logged
after that checkpoint.
"""

from __future__ import annotations

import csv
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.cli import SaveConfigCallback
from lightning.pytorch.loggers import CSVLogger
from typing_extensions import override

from ranklit._checkpoint import load_checkpoint
from ranklit.cli._run_requests import fresh_run_config
from ranklit.errors import UserError

__all__ = [
    "BEST",
    "RESUMABLE",
    "ResumePoint",
    "RunConfigSaver",
    "RunSnapshot",
    "changed_settings",
    "continue_metrics_csv",
    "latest_checkpoint",
    "logged_steps",
    "run_directory",
    "run_versions",
    "training_progress",
]

#: The checkpoints a run is resumed from, in its ``checkpoints/`` folder (the most advanced that loads wins).
RESUMABLE = ("last.ckpt", "last-*.ckpt", "interrupted.ckpt")
#: The best checkpoints of a ``ModelCheckpoint`` (the shipped configs' ``filename: best-{epoch}-{step}``): offered
#: when none of :data:`RESUMABLE` can be resumed.
BEST = ("best*.ckpt",)
_COMPLETE = ("state_dict", "optimizer_states", "loops", "callbacks")  # what a resumable checkpoint holds


def run_versions(experiment: str | Path) -> list[int]:
    """The ``n`` of the ``version_<n>`` folders in ``experiment`` (``<save_dir>/<name>``), newest first.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> for n in (0, 2, 10): (root / f"version_{n}").mkdir()
        >>> run_versions(root), run_versions(root / "absent")
        ([10, 2, 0], [])
    """
    names = [p.name for p in Path(experiment).glob("version_*") if p.is_dir()]
    return sorted((int(m.group(1)) for name in names if (m := re.fullmatch(r"version_(\d+)", name))), reverse=True)


@dataclass
class ResumePoint:
    """The checkpoint a run resumes from (``path``, ``None`` when none loads), its contents, and one line for each
    newer checkpoint skipped (``"<path>: <reason>"``)."""

    path: Path | None = None
    checkpoint: dict[str, Any] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)


def training_progress(checkpoint: dict[str, Any]) -> tuple[int, int, int]:
    """How far the training of a checkpoint went: its epoch, global (optimiser) step and position in the epoch
    (batches trained, as :class:`ranklit.callbacks.ResumableTraining` recorded it; Lightning's count without it).

    Example:
        >>> state = {"ResumableTraining": {"batches_trained": 2}}
        >>> training_progress({"epoch": 1, "global_step": 6, "callbacks": state})
        (1, 6, 2)
    """
    state = checkpoint.get("callbacks", {}).get("ResumableTraining") or {}
    batches = state.get("batches_trained")
    if batches is None:
        loop = checkpoint.get("loops", {}).get("fit_loop", {}).get("epoch_loop.batch_progress", {})
        batches = loop.get("current", {}).get("completed", 0)
    return int(checkpoint.get("epoch", 0)), int(checkpoint.get("global_step", 0)), int(batches)


def _name_order(path: Path) -> tuple[int, int, str]:
    """Ties and listings: ``last.ckpt``, ``interrupted.ckpt``, then ``last-1.ckpt``, ``last-2.ckpt``, …"""
    if path.name in ("last.ckpt", "interrupted.ckpt"):
        return (0 if path.name == "last.ckpt" else 1), 0, path.name
    age = path.stem.rpartition("-")[2]
    return 2, int(age) if age.isdigit() else 0, path.name


def latest_checkpoint(folder: str | Path, patterns: tuple[str, ...] = RESUMABLE) -> ResumePoint:
    """The most advanced (by :func:`training_progress`, never by file times: a copied run folder has new ones) of
    the checkpoints of ``folder`` matching ``patterns`` (:data:`RESUMABLE`) that loads and holds a complete training
    state; each one that does not (truncated, empty, weights only) is named in ``skipped``, with the reason. Every
    candidate is loaded (a few files).

    Example:
        >>> import tempfile, torch
        >>> folder = Path(tempfile.mkdtemp())
        >>> torch.save({k: {} for k in _COMPLETE} | {"epoch": 1, "global_step": 8}, folder / "last-1.ckpt")
        >>> torch.save({k: {} for k in _COMPLETE} | {"epoch": 0, "global_step": 4}, folder / "last-2.ckpt")
        >>> (folder / "last.ckpt").write_bytes(b"PK")  # a truncated write
        2
        >>> point = latest_checkpoint(folder)
        >>> point.path.name, len(point.skipped)
        ('last-1.ckpt', 1)
    """
    candidates = sorted({p for pattern in patterns for p in Path(folder).glob(pattern) if p.is_file()}, key=_name_order)
    point, loaded = ResumePoint(), []
    for path in candidates:
        try:
            checkpoint = load_checkpoint(path)
        except UserError as error:  # any failure to load means "not this one"
            point.skipped.append(f"{path}: does not load ({str(error).removeprefix(f'{path}: ').rstrip('.')})")
            continue
        missing = [key for key in _COMPLETE if not isinstance(checkpoint, dict) or key not in checkpoint]
        if missing:
            point.skipped.append(f"{path}: incomplete (no {', '.join(missing)})")
            continue
        loaded.append((training_progress(checkpoint), -candidates.index(path), path, checkpoint))
    if loaded:
        *_, point.path, point.checkpoint = max(loaded, key=lambda entry: entry[:2])
    return point


def logged_steps(checkpoint: dict[str, Any]) -> int | None:
    """The logger step a checkpoint was saved at: the ``metrics.csv`` rows it covers have ``step`` below it."""
    loop = checkpoint.get("loops", {}).get("fit_loop", {}).get("epoch_loop.state_dict", {})
    steps = loop.get("_batches_that_stepped")
    return int(steps) if steps is not None else None


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


def continue_metrics_csv(logger: CSVLogger, before_step: int | None = None) -> None:
    """Make a ``CSVLogger`` writing into an existing version append to its ``metrics.csv`` (Lightning's writer
    deletes the file it finds): the rows already there are kept, but those with a ``step`` of ``before_step`` or
    more (logged after the checkpoint the run resumes from, which the resumed run logs again), and the new ones
    follow them."""
    path = Path(logger.log_dir) / "metrics.csv"
    if not path.is_file():
        return
    with path.open(newline="") as file:
        rows = list(csv.DictReader(file))
    if before_step is not None:
        rows = [row for row in rows if not row.get("step") or int(float(row["step"])) < before_step]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Experiment logs directory .* exists and is not empty")
        writer = logger.experiment  # created now: it removes the file
    writer.metrics = rows
    writer.save()


class RunSnapshot:
    """The files of a run directory as they are now, to put back if a resume is refused after it began writing.

    The contents and modification times of every file but the checkpoints are kept in memory (logs and configs:
    small), the names in ``skip`` left out (the run's lock: its holder releases it); :meth:`restore` rewrites those
    that changed, removes the files that appeared, and checks that no checkpoint changed (a refused resume writes
    none: :class:`ranklit.callbacks.FaultTolerance` saves nothing before the first trained batch).

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp()); (folder / "metrics.csv").write_text("step\\n0\\n")
        7
        >>> snapshot = RunSnapshot(folder)
        >>> (folder / "metrics.csv").write_text("step\\n"); (folder / "run.lock").touch()
        5
        >>> snapshot.restore(); sorted(p.name for p in folder.iterdir()), (folder / "metrics.csv").read_text()
        (['metrics.csv'], 'step\\n0\\n')
    """

    def __init__(self, folder: str | Path, skip: tuple[str, ...] = ()) -> None:
        self.folder, self.skip = Path(folder), {Path(folder) / name for name in skip}
        self.files = {path: self._state(path) for path in self._files()}

    def _files(self) -> list[Path]:
        """The files of the folder, but those of ``skip`` (a lock, which its own holder releases)."""
        found = self.folder.rglob("*") if self.folder.is_dir() else []
        return [p for p in found if p.is_file() and p not in self.skip]

    @staticmethod
    def _state(path: Path) -> tuple[bytes | None, int, int]:
        stat = path.stat()
        contents = None if path.suffix == ".ckpt" else path.read_bytes()
        return contents, stat.st_size, stat.st_mtime_ns

    def restore(self) -> None:
        """Put every file back as it was (module docstring)."""
        for path in self._files():
            if path not in self.files:
                path.unlink(missing_ok=True)
        for path, (contents, size, mtime) in self.files.items():
            if path.is_file() and self._state(path) == (contents, size, mtime):
                continue
            if contents is None:
                raise RuntimeError(f"{path} changed during a refused resume.")
            path.write_bytes(contents)
            os.utime(path, ns=(mtime, mtime))


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
    with loggers that share a ``save_dir`` (wandb) never overwrite each other's config. A ``fit`` saves it as a
    fresh-run config (:func:`ranklit.cli._run_requests.fresh_run_config`); ``validate``, ``test`` and ``predict``
    never replace a ``config.yaml`` already there (``ranklit test --config <run>/config.yaml`` leaves the run's
    config as it is)."""

    @override
    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if self.already_saved:
            return
        folder = Path(trainer.strategy.broadcast(str(run_directory(trainer))))
        path = folder / self.config_filename
        if trainer.is_global_zero and (stage == "fit" or not path.exists()):
            folder.mkdir(parents=True, exist_ok=True)
            # nulls kept: the config reproduces the run
            config = fresh_run_config(self.config) if stage == "fit" else self.config
            path.write_text(self.parser.dump(config, skip_unset=False))
        self.already_saved = trainer.strategy.broadcast(True)
