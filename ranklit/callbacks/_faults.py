"""``FaultTolerance``: stop on non-finite numbers, never checkpoint them, and checkpoint every other interruption.

* **Non-finite numbers.** After every backward pass the gradients, and after every step the parameters and
  floating-point buffers (batch-norm running statistics) are checked; the first non-finite tensor stops training
  with a ``FloatingPointError`` naming it and the global step. Every checkpoint's weights are checked before it is
  written, so no checkpoint with non-finite weights is ever saved (a ``ModelCheckpoint`` save fails instead). The
  gradient check is skipped under fp16 mixed precision, whose loss scaler produces and skips non-finite gradients.
* **Signals.** ``SIGTERM``, Ctrl-C (``SIGINT``) and ``SIGUSR1`` go through :mod:`ranklit.training.stops`: every
  process of the run stops after the same training batch (or at the end of the epoch, after its validation and
  checkpoint, when the signal arrives in its last batch or in a validation), and the state is saved to
  ``dirpath/filename.ckpt``: the resumed run equals the uninterrupted one (with
  :class:`ranklit.callbacks.ResumableTraining`). A second Ctrl-C stops at once and saves nothing (the state may be
  in the middle of an optimiser step): the newest checkpoint written before stays the resume point.
* **Other exceptions between two training batches** (a corrupt training image, raised while the next batch is
  loaded: the error names the file) save the state on the way out, on one process only: under several processes an
  exception on one rank cannot wait for the others, and nothing is saved.
* **An exception inside a step** (a CUDA out-of-memory error in backward, an error in the optimiser or in a
  callback's ``on_train_batch_start``/``on_train_batch_end``) or inside a validation writes **no checkpoint**: the
  failed step may already have changed the batch-norm running statistics, the cross-batch memory, the optimiser
  state and weights (an error inside ``optimizer.step``), the random states and the logged values, and Lightning's
  counters would then describe neither the state before the step nor the one after it. The newest checkpoint
  written before (``last.ckpt`` of the save schedule, or an earlier ``interrupted.ckpt``) stays the resume point,
  so the resumed run equals the uninterrupted one; the work since it is lost (``every_n_steps``/``every_minutes``
  bound it). Snapshotting all of that at every step boundary would cost a copy of the weights and the optimiser
  state per step (:func:`step_in_progress` tells the two cases apart; ``docs/resuming.md``).
* **Nothing new, nothing saved.** An exception before the first training batch of this ``fit`` (a refused resume,
  a bad setting) writes no checkpoint: the checkpoint the run was resumed from stays the resume point.

Resume with ``trainer.fit(..., ckpt_path=...)``. **SLURM**: a trainer whose ``SLURMEnvironment`` keeps Lightning's
auto-requeue (its default) keeps Lightning's ``SIGUSR1`` handler, which writes ``hpc_ckpt_*.ckpt`` mid-step; the
``ranklit`` command runs with ``SLURMEnvironment(auto_requeue=False)`` (:mod:`ranklit.training._slurm`), so
``SIGUSR1`` stops and saves as above, and with ``requeue=True`` global rank 0 then runs ``scontrol requeue``.

Example:
    >>> import lightning as L
    >>> trainer = L.Trainer(callbacks=[FaultTolerance("checkpoints")], logger=False, enable_progress_bar=False)
"""

from __future__ import annotations

import signal
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import OnExceptionCheckpoint
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor
from typing_extensions import override

from ranklit._checks import check_positive_int
from ranklit._compat.lightning import batch_progress
from ranklit.callbacks._checkpoints import flush_loggers
from ranklit.callbacks._training_stops import agree_after_batch, agree_after_epoch
from ranklit.training import requeue_job, use_safe_checkpoint_io
from ranklit.training.stops import StopSignals, mark_stopped, record_stop, stopped_by

__all__ = ["FaultTolerance", "first_non_finite", "step_in_progress"]


def step_in_progress(trainer: L.Trainer) -> bool:
    """Whether ``trainer`` is inside a training step or a validation (module docstring): a batch was fetched
    (Lightning's ``ready`` counter) and not completed, or a validation runs; ``False`` between two training batches.

    Example:
        >>> step_in_progress(L.Trainer(logger=False, enable_progress_bar=False))
        False
    """
    current: Any = batch_progress(trainer).current
    return current.ready != current.completed or trainer.validating or trainer.sanity_checking


def first_non_finite(tensors: Iterable[tuple[str, Tensor | None]]) -> str | None:
    """The name of the first floating-point tensor holding a NaN or an infinity, or ``None`` (one device sync).

    Example:
        >>> first_non_finite([("a", torch.ones(2)), ("b", torch.tensor([1.0, float("inf")]))])
        'b'
    """
    named = [(name, t) for name, t in tensors if t is not None and t.is_floating_point() and t.numel()]
    if not named:
        return None
    finite = torch.stack([torch.isfinite(t).all() for _, t in named]).cpu()
    return None if bool(finite.all()) else named[int((~finite).nonzero()[0])][0]


class FaultTolerance(OnExceptionCheckpoint):
    """Non-finite checks and the checkpoint of an interrupted run (module docstring).

    Args:
        dirpath: folder of the interruption checkpoint (e.g. the ``ModelCheckpoint`` folder).
        filename: its name, without ``.ckpt``.
        check_every_n_steps: check gradients, parameters and buffers every that many steps (1: every step); the
            check before a checkpoint is written always runs.
        requeue: after a stop by ``SIGUSR1`` under SLURM, requeue the job (``scontrol requeue``, on global rank 0)
            once the checkpoint is saved.
    """

    def __init__(
        self,
        dirpath: str | Path,
        filename: str = "interrupted",
        check_every_n_steps: int = 1,
        requeue: bool = False,
    ) -> None:
        super().__init__(dirpath, filename)
        check_positive_int("check_every_n_steps", check_every_n_steps)
        self.check_every_n_steps = check_every_n_steps
        self.requeue = requeue
        self._first_step: int | None = None  # the global step this `fit` started training from

    @override
    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        StopSignals.install(trainer)  # before Lightning registers its handlers (for the baseline validation too)
        use_safe_checkpoint_io(trainer)  # loads weights only, writes atomically

    @override
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        mark_stopped(None)
        self._first_step = trainer.global_step

    @override
    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._first_step = None

    def _due(self, trainer: L.Trainer) -> bool:
        return trainer.global_step % self.check_every_n_steps == 0

    @staticmethod
    def _stop(trainer: L.Trainer, what: str, name: str) -> None:
        raise FloatingPointError(
            f"Non-finite {what} `{name}` at global step {trainer.global_step} (epoch {trainer.current_epoch}): "
            "training stopped and no checkpoint is written with it. Resume from the last good checkpoint "
            "(`--resume true`) with gradient clipping (`--trainer.gradient_clip_val 1.0`), `--trainer.precision 32` "
            "or a lower learning rate (`--model.optimizer.init_args.lr ... --resume_new_rates "
            "'[model.optimizer.init_args.lr]'`), or check the data."
        )

    @override
    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer: Any) -> None:
        if not self._due(trainer) or str(trainer.precision).startswith("16"):
            return
        if name := first_non_finite((n, p.grad) for n, p in pl_module.named_parameters()):
            self._stop(trainer, "gradient of", name)

    @override
    def on_train_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        if self._due(trainer):
            self._check_weights(trainer, pl_module.state_dict(keep_vars=True).items())
        agree_after_batch(trainer)

    @override
    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        agree_after_epoch(trainer)  # Lightning stops after the epoch's checkpoints (RunCheckpoint) are written

    @override
    def on_save_checkpoint(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        checkpoint: dict[str, Any],
    ) -> None:
        self._check_weights(trainer, checkpoint.get("state_dict", {}).items())

    def _check_weights(self, trainer: L.Trainer, tensors: Iterable[tuple[str, Tensor]]) -> None:
        if name := first_non_finite((n, t.detach()) for n, t in tensors):
            self._stop(trainer, "parameter or buffer", name)

    @override
    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        first, self._first_step = self._first_step, None
        stop = record_stop(exception)
        if isinstance(exception, KeyboardInterrupt):
            rank_zero_info(
                "Stopped at once by a second Ctrl-C: no checkpoint written (the state may be in the middle of a "
                f"step); `--resume true` continues from the newest checkpoint in {self.dirpath}."
            )
            return
        if isinstance(exception, FloatingPointError):
            return  # the state holds non-finite numbers: keep the last good checkpoint
        signalled = stop is not None
        self._save_on_exception(trainer, exception, first, signalled)
        if signalled and self.requeue and stopped_by() == signal.SIGUSR1 and trainer.is_global_zero:
            requeue_job()  # after the save (`scontrol requeue` ends the job)

    def _save_on_exception(
        self, trainer: L.Trainer, exception: BaseException, first: int | None, signalled: bool
    ) -> None:
        if first is None or trainer.global_step == first:
            return  # nothing trained since the run (re)started: its checkpoint stays the resume point
        if not signalled and step_in_progress(trainer):
            where = "a validation" if trainer.validating else "a training step"
            rank_zero_info(
                f"{type(exception).__name__} inside {where} at global step {trainer.global_step}: no checkpoint "
                "written (the step may have changed batch-norm statistics, the optimiser state or the memory); "
                f"`--resume true` continues from the newest checkpoint in {self.dirpath}."
            )
            return
        if trainer.world_size > 1 and not signalled:
            rank_zero_info(f"{type(exception).__name__} on one of {trainer.world_size} processes: no checkpoint saved.")
            return
        flush_loggers(trainer)
        trainer.save_checkpoint(self.ckpt_path, weights_only=False)
        signum = stopped_by() if signalled else None
        cause = signal.Signals(signum).name if signum else type(exception).__name__
        rank_zero_info(
            f"Training interrupted by {cause} at global step {trainer.global_step}; resumable checkpoint saved to "
            f"{self.ckpt_path} (resume with `ckpt_path={self.ckpt_path!r}`, or `--resume true` on the command line)."
        )
