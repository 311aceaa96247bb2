"""SLURM: ranklit, not Lightning, handles the requeue signal (``SIGUSR1``).

Lightning's SLURM plugin (``SLURMEnvironment(auto_requeue=True)``, its default) answers ``SIGUSR1`` from inside the
signal handler: it writes ``hpc_ckpt_<n>.ckpt`` of the state in the middle of a step into the working folder,
requeues the job and keeps training; and any later ``fit`` (or ``test``) without ``ckpt_path`` on SLURM silently
restores the newest such file. ranklit runs under SLURM with ``SLURMEnvironment(auto_requeue=False)``
(:func:`slurm_plugins`), so ``SIGUSR1`` is a stop like ``SIGTERM`` (:mod:`ranklit.training.stops`: the run stops
after a training batch, saves ``interrupted.ckpt`` in its run folder and exits with 138), and refuses to start while
an ``hpc_ckpt_*.ckpt`` would be restored without being asked for (:func:`unrequested_hpc_checkpoints`). With
``FaultTolerance(requeue=True)`` (the command's ``--requeue true``) global rank 0 then requeues the job
(:func:`requeue_job`); the requeued job's command continues the run with ``--resume true``.

Example:
    >>> slurm_job_id({"SLURM_JOB_ID": "4242"}), slurm_job_id({"SLURM_ARRAY_JOB_ID": "7", "SLURM_ARRAY_TASK_ID": "3"})
    ('4242', '7_3')
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lightning.pytorch.plugins.environments import ClusterEnvironment, SLURMEnvironment
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn

from ranklit.errors import UserError

__all__ = ["requeue_job", "slurm_job_id", "slurm_plugins", "unrequested_hpc_checkpoints"]


def slurm_job_id(environ: Mapping[str, str] = os.environ) -> str | None:
    """The id ``scontrol requeue`` takes: ``<array job>_<task>`` for an array task, else ``SLURM_JOB_ID``."""
    array, task = environ.get("SLURM_ARRAY_JOB_ID"), environ.get("SLURM_ARRAY_TASK_ID")
    return f"{array}_{task}" if array and task else environ.get("SLURM_JOB_ID")


def requeue_job() -> bool:
    """Run ``scontrol requeue <job id>`` (the job must be requeueable: ``#SBATCH --requeue``); whether it did."""
    job = slurm_job_id()
    if not job:
        rank_zero_warn("`--requeue true`: no SLURM_JOB_ID in the environment, nothing requeued.")
        return False
    try:
        result = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        rank_zero_warn(f"`scontrol requeue {job}` failed ({error}): the job is not requeued.")
        return False
    if result.returncode != 0:
        rank_zero_warn(f"`scontrol requeue {job}` exited with {result.returncode}: {result.stderr.strip()}")
        return False
    rank_zero_info(f"Requeued SLURM job {job}: its command continues the run with `--resume true`.")
    return True


def slurm_plugins(plugins: Any) -> list[Any] | None:
    """The trainer's ``plugins`` with ``SLURMEnvironment(auto_requeue=False)`` when running under SLURM (``None``:
    leave them as configured: not SLURM, or another cluster environment is configured).

    Raises:
        UserError: a configured ``SLURMEnvironment`` with ``auto_requeue=True``.
    """
    if not SLURMEnvironment.detect():
        return None
    given = list(plugins) if isinstance(plugins, (list, tuple)) else [] if plugins is None else [plugins]
    for plugin in given:
        if isinstance(plugin, SLURMEnvironment) and plugin.auto_requeue:
            raise UserError(
                "`trainer.plugins`: SLURMEnvironment(auto_requeue=True) would write Lightning's mid-step hpc_ckpt "
                "files and keep training after SIGUSR1; ranklit stops at a batch boundary and saves interrupted.ckpt "
                "itself: set `auto_requeue: false` (or drop the plugin), and pass `--requeue true` to requeue the job."
            )
    if any(isinstance(plugin, ClusterEnvironment) for plugin in given):
        return None
    return [*given, SLURMEnvironment(auto_requeue=False)]


def unrequested_hpc_checkpoints(folder: str | Path, ckpt_path: Any) -> None:
    """Refuse to run under SLURM without ``ckpt_path`` while ``folder`` (the trainer's ``default_root_dir``) holds
    an ``hpc_ckpt_*.ckpt``: Lightning would restore it without being asked to.

    Raises:
        UserError: naming the files and the two ways on.
    """
    if ckpt_path is not None or not SLURMEnvironment.detect():
        return
    found = sorted(Path(folder).glob("hpc_ckpt_*.ckpt"))
    if found:
        names = ", ".join(str(path) for path in found)
        raise UserError(
            f"{names}: Lightning's SLURM requeue checkpoint, which it would restore into this run without being asked "
            f"to. Continue from it explicitly (`--ckpt_path {found[-1]}`), or move it out of {Path(folder).resolve()} "
            "(ranklit saves interrupted.ckpt in the run folder and continues it with `--resume true`)."
        )
