"""The command line's side of resuming: which run folder and checkpoint a ``ranklit fit`` continues, and its refusals.

``--resume true`` (or ``--ckpt_path last``) continues the newest ``version_<n>`` of the logger's ``<save_dir>/<name>``
that has a resumable checkpoint (or the configured ``version``), from its most advanced checkpoint that loads
(:func:`ranklit.cli._runs.latest_checkpoint`, by recorded training progress; each damaged one is named on stderr
with the reason). When that version has checkpoints but none can be resumed, the resume is refused, naming each
file, a complete best checkpoint to pass as ``--ckpt_path`` and the newest older version that can be resumed (with
the ``--ckpt_path`` that continues it); ``--resume or_fresh`` starts a new version instead (and names that older one).
An explicit ``--ckpt_path PATH`` whose file lies in a run's ``checkpoints/`` folder continues that run folder
wherever it is (renamed or moved; CSV and TensorBoard loggers), any other path starts a new version from it.

The process that will be global rank 0 takes the run's lock (:func:`ranklit.callbacks._locks.acquire`) as soon as
the folder is known, before anything writes into it. A resume is refused, with one line on stderr and exit code 2,
when another live process holds that lock (nothing has been written), when a model setting differs from the
checkpoint's, or when the checkpoint cannot continue the run as configured (:class:`ranklit.callbacks.ResumeRefused`);
the files of the run are then left as they were (:class:`ranklit.cli._runs.RunSnapshot`, taken once the lock is
held).

**The seed of a resumed run is its own.** A resume restores the random states of the checkpoint, so a
``seed_everything`` other than the run's could not take effect: :func:`use_run_seed` refuses it (naming both seeds and
how to start a new run with the other one) and otherwise sets ``seed_everything`` to the run's seed (``true``, the
default, and ``false`` included), which is then what Lightning seeds the process with and what the run's
``config.yaml`` records. The run's seed is the one its checkpoint records
(:meth:`ranklit.callbacks.ResumableTraining.run_seed`); a checkpoint of an older ranklit records none, and the seed is
then not checked (nor replaced)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lightning.pytorch.utilities import rank_zero_only

from ranklit._checkpoint import load_checkpoint
from ranklit.callbacks import (
    LOCK_FILE,
    ResumableTraining,
    ResumeRefused,
    RunLocked,
    acquire_run_lock,
    put_back_run_lock,
    release_run_locks,
)
from ranklit.cli._runs import BEST, RESUMABLE, ResumePoint, RunSnapshot, latest_checkpoint, run_versions
from ranklit.cli._writable import check_writable
from ranklit.training.stops import exit_code

__all__ = ["OR_FRESH", "ResumeRequest", "find_resume", "rank_zero_process", "refusals_and_stops", "use_run_seed"]

#: ``--resume or_fresh``: resume as ``--resume true``, or start a new run when no checkpoint can be resumed.
OR_FRESH = "or_fresh"

_FOLDER_LOGGERS = ("CSVLogger", "TensorBoardLogger")  # loggers whose run folder is save_dir/name/version
_snapshots: list[RunSnapshot] = []  # the run folder of this process's resume, to restore on a refusal
_stale_locks: list[tuple[Path, bytes, int]] = []  # the stale lock it took over: path, contents, modification time


@dataclass
class ResumeRequest:
    """What a resumed ``fit`` continues: the run ``folder`` (``None``: a new version) and its checkpoint."""

    folder: Path | None
    point: ResumePoint = field(default_factory=ResumePoint)


def rank_zero_process() -> bool:
    """Whether this process is (or will be) global rank 0: the one that writes the run's files."""
    node = int(os.environ.get("NODE_RANK", os.environ.get("GROUP_RANK", "0")))
    return getattr(rank_zero_only, "rank", 0) == 0 and node == 0


def experiment_folder(config: Any) -> tuple[Path | None, Any]:
    """``<save_dir>/<name>`` of the (first) configured logger and the logger's config; Lightning's default logger's
    folder (``lightning_logs``) and ``None``; ``(None, None)`` without a logger."""
    logger = config.trainer.get("logger")
    if isinstance(logger, list):
        logger = logger[0] if logger else False
    root = Path(config.trainer.get("default_root_dir") or ".")
    if logger is False:
        return None, None
    init_args = getattr(logger, "init_args", None)
    if init_args is None:
        return root / "lightning_logs", None
    return Path(init_args.get("save_dir") or root) / str(init_args.get("name") or ""), logger


def _candidate_folders(config: Any, experiment: Path | None, version: Any) -> list[Path]:
    if experiment is None:
        return [Path(config.trainer.get("default_root_dir") or ".")]
    if version is not None:
        return [experiment / (version if isinstance(version, str) else f"version_{version}")]
    return [experiment / f"version_{n}" for n in run_versions(experiment)]


def find_resume(config: Any) -> ResumeRequest | None:
    """The run and checkpoint a ``fit`` config continues (module docstring); sets ``config.ckpt_path`` and the
    logger's folder to them. ``None`` when the command resumes nothing."""
    _snapshots.clear()
    experiment, logger = experiment_folder(config)
    logger_args = getattr(logger, "init_args", None)
    if config.get("resume") or config.get("ckpt_path") == "last":
        version = logger_args.get("version") if logger_args is not None else None
        request = ResumeRequest(None)
        candidates = _candidate_folders(config, experiment, version)
        for folder in candidates:
            point = latest_checkpoint(folder / "checkpoints")
            for line in point.skipped:
                sys.stderr.write(f"Skipping {line}.\n")
            if point.path is not None or point.skipped:  # a run with resumable checkpoints, or damaged ones only
                request = ResumeRequest(folder, point)
                break
        if request.folder is not None and request.point.path is None:
            older = _older_resumable(candidates[candidates.index(request.folder) + 1 :])
            if config.get("resume") != OR_FRESH or config.get("ckpt_path") == "last":
                raise ResumeRefused(_nothing_resumable(request.folder / "checkpoints", request.point) + older)
            sys.stderr.write(f"--resume {OR_FRESH}: no checkpoint of {request.folder} can be resumed (kept as they "
                             f"are); starting a fresh run.{older}\n")
            return None
        if request.folder is None:
            where = f"{experiment}/version_*/checkpoints" if version is None else f"{experiment}/{version}/checkpoints"
            if config.get("ckpt_path") == "last":
                raise ResumeRefused(
                    f"`--ckpt_path last`: no checkpoint that loads ({', '.join(RESUMABLE)}) in {where}. Run without "
                    "`--ckpt_path` to start a new run, or give the logger's `save_dir`/`name` of the run to resume."
                )
            sys.stderr.write(f"--resume: nothing to resume in {where}; starting a fresh run.\n")
            return None
        config.ckpt_path = str(request.point.path)
        sys.stderr.write(f"Resuming {request.folder} from {request.point.path}.\n")
    elif config.get("ckpt_path"):
        path = Path(config.ckpt_path)
        run = path.resolve().parent.parent if path.resolve().parent.name == "checkpoints" else None
        checkpoint = load_checkpoint(path)  # one line naming a missing, hostile or unreadable file
        request = ResumeRequest(run, ResumePoint(path, checkpoint))
    else:
        return None
    if request.folder is not None:
        _continue_folder(request.folder, experiment, logger, config.trainer.get("enable_checkpointing") is not False)
    return request


def use_run_seed(config: Any, request: ResumeRequest) -> None:
    """Set the ``seed_everything`` of a resumed ``fit`` config to the run's seed; refuse another one (module
    docstring).

    Raises:
        ResumeRefused: ``seed_everything`` is a number other than the run's seed (or the run was not seeded).
    """
    recorded, seed = ResumableTraining.run_seed(request.point.checkpoint)
    if not recorded:  # a checkpoint of an older ranklit
        return
    given = config.get("seed_everything")
    if not isinstance(given, bool) and given != seed:
        run = "was not seeded (`seed_everything: false`)" if seed is None else f"was seeded with {seed}"
        raise ResumeRefused(
            f"`seed_everything: {given}` (the config or `--seed_everything`) cannot take effect on a resume: the run "
            f"{run}, and a resume restores the random states of its checkpoint {request.point.path}. Resume with "
            f"`--seed_everything {'false' if seed is None else seed}` (the run's seed; `true`, the default, also takes "
            f"it), or start a new run with seed {given}: the same command without `--resume`/`--ckpt_path`."
        )
    config.seed_everything = False if seed is None else seed


def _nothing_resumable(folder: Path, point: ResumePoint) -> str:
    """The refusal of a resume whose run has checkpoints, none resumable: each file and why, and the ways on."""
    best = latest_checkpoint(folder, BEST)
    fallback = (
        f"`--ckpt_path {best.path}` continues the run from its best checkpoint (epoch {best.checkpoint['epoch']}, "
        f"step {best.checkpoint['global_step']}, a full training state); "
        if best.path is not None
        else ""
    )
    return (
        f"--resume: no checkpoint of {folder} can be resumed: {'; '.join(point.skipped)}. {fallback}"
        f"`--resume {OR_FRESH}` starts a new run instead (these files are kept)."
    )


def _older_resumable(folders: list[Path]) -> str:
    """`` An older run ... continues it.``: the newest of ``folders`` (older versions) with a checkpoint that can be
    resumed, and the ``--ckpt_path`` that continues it; ``""`` when none has one."""
    for folder in folders:
        point = latest_checkpoint(folder / "checkpoints")
        if point.path is not None:
            epoch, step = point.checkpoint.get("epoch"), point.checkpoint.get("global_step")
            return (
                f" An older run, {folder}, holds a complete training state ({point.path.name}, epoch {epoch}, step "
                f"{step}): `--ckpt_path {point.path}` continues it."
            )
    return ""


def _continue_folder(folder: Path, experiment: Path | None, logger: Any, checkpoints: bool) -> None:
    """Log into ``folder``: the logger's ``version`` (its ``save_dir``/``name`` too when the folder was moved).

    On the process that will be global rank 0, the folder (and its ``checkpoints/`` with ``checkpoints``) must be
    writable (:func:`ranklit.cli._writable.check_writable`), then the run's lock is taken
    (:func:`ranklit.callbacks._locks.acquire` raises :class:`RunLocked` while another process trains it), both before
    anything is written, then the folder is snapshotted, to be put back if the resume is refused later (a stale lock
    taken over included)."""
    if rank_zero_process():
        check_writable(folder, checkpoints)
        stale = acquire_run_lock(folder)
        _snapshots.append(RunSnapshot(folder, skip=(LOCK_FILE,)))  # the lock is released on every way out
        if stale is not None:  # a refusal puts back the stale lock taken over, as it was
            _stale_locks.append((folder / LOCK_FILE, *stale))
    if logger is None or not str(getattr(logger, "class_path", "")).endswith(_FOLDER_LOGGERS):
        return
    name = folder.name
    version: int | str = int(name.removeprefix("version_")) if name.removeprefix("version_").isdigit() else name
    if experiment is None or folder.resolve().parent != experiment.resolve():
        logger.init_args.save_dir, logger.init_args.name = str(folder.parent.parent), folder.parent.name
    logger.init_args.version = version


@contextmanager
def refusals_and_stops() -> Iterator[None]:
    """Exit with ``128 + n`` after a stop by signal ``n`` (Lightning ends it with code 0, or 1 after a second
    Ctrl-C), and turn a refused resume into one line on stderr and exit code 2, with the run's files put back (only
    those of a run whose lock this process holds: a process refused by the lock has written nothing). The run locks
    of this process are released on every way out."""
    try:
        yield
    except SystemExit as stop:
        if stop.code in (None, 0, 1) and (code := exit_code()) is not None:
            raise SystemExit(code) from None
        raise
    except (ResumeRefused, RunLocked) as refusal:
        for snapshot in _snapshots:
            snapshot.restore()
        release_run_locks()  # before the stale locks are put back (a Lightning callback may have released it already)
        for path, contents, mtime in _stale_locks:
            put_back_run_lock(path, contents, mtime)
        sys.stderr.write(f"error: {refusal}\n")
        raise SystemExit(2) from None
    finally:
        _snapshots.clear()
        _stale_locks.clear()
        release_run_locks()
