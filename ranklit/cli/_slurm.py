"""The command line under SLURM: ``--requeue`` and the trainer's SLURM set-up (:mod:`ranklit.training._slurm`).

Every ``ranklit`` run command under SLURM gets ``SLURMEnvironment(auto_requeue=False)``, so ``SIGUSR1`` is one of
ranklit's stops (``interrupted.ckpt`` in the run folder, exit code 138) and Lightning writes no ``hpc_ckpt_*.ckpt``;
a run without ``ckpt_path`` refuses to start while Lightning would restore such a file. ``ranklit fit ... --resume
true --requeue true`` also requeues the job after that stop (``scontrol requeue $SLURM_JOB_ID``, from global rank 0):
the requeued job runs the same command, which continues the run. Without ``--requeue`` the job script decides
(``[ $? -eq 138 ] && scontrol requeue "$SLURM_JOB_ID"``).
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch import Callback, Trainer

from ranklit.callbacks import FaultTolerance
from ranklit.errors import UserError
from ranklit.training import slurm_plugins, unrequested_hpc_checkpoints

__all__ = ["add_requeue_argument", "set_up_slurm", "trainer_plugins"]


def add_requeue_argument(parser: Any) -> None:
    """``--requeue`` (fit only; module docstring)."""
    parser.add_argument(
        "--requeue",
        type=bool,
        default=False,
        help="SLURM: requeue the job after a stop by SIGUSR1 (with --resume true).",
    )


def trainer_plugins(trainer_config: Any) -> dict[str, Any]:
    """The ``plugins`` argument of the trainer under SLURM (``{}``: as configured)."""
    plugins = slurm_plugins(trainer_config.get("plugins"))
    return {} if plugins is None else {"plugins": plugins}


def set_up_slurm(trainer: Trainer, subcommand: str, config: Any) -> None:
    """Refuse an ``hpc_ckpt_*.ckpt`` that Lightning would restore unasked, and a ``--requeue`` that cannot work;
    give the run's :class:`FaultTolerance` the requeue."""
    if not config.get("requeue"):
        unrequested_hpc_checkpoints(trainer.default_root_dir, config.get("ckpt_path"))
        return
    if subcommand != "fit" or not config.get("resume"):
        raise UserError(
            "`--requeue true` requeues a `ranklit fit` stopped by SIGUSR1, whose command must continue the run: "
            "add `--resume true` (the requeued job runs the same command)."
        )
    callbacks: list[Callback] = trainer.callbacks  # type: ignore[attr-defined]  # set by Lightning's connector
    stops = [callback for callback in callbacks if isinstance(callback, FaultTolerance)]
    if not stops:
        raise UserError("`--requeue true` needs the run's checkpoints: drop `--trainer.enable_checkpointing false`.")
    unrequested_hpc_checkpoints(trainer.default_root_dir, config.get("ckpt_path"))
    for callback in stops:
        callback.requeue = True
