"""``FaultTolerance``: stop on non-finite numbers, never checkpoint them, and checkpoint every other interruption.

* **Non-finite numbers.** After every backward pass the gradients, and after every step the parameters and
  floating-point buffers (batch-norm running statistics) are checked; the first non-finite tensor stops training
  with a ``FloatingPointError`` naming it and the global step. Every checkpoint's weights are checked before it is
  written, so no checkpoint with non-finite weights is ever saved (a ``ModelCheckpoint`` save fails instead). The
  gradient check is skipped under fp16 mixed precision, whose loss scaler produces and skips non-finite gradients.
* **Interruptions.** On any other exception the current state is saved to ``dirpath/filename.ckpt`` before the
  exception continues, e.g. a corrupt training image (the error names the file), ``SIGTERM`` (Lightning stops at the
  end of the current batch, then this callback saves) or a ``KeyboardInterrupt``. During training the first Ctrl-C
  (``SIGINT``) is turned into that ``SIGTERM`` stop, so the checkpoint falls between two batches and the resumed run
  is exact wherever the key was pressed; a second Ctrl-C stops at once. Resume with
  ``trainer.fit(..., ckpt_path="last")`` (this checkpoint or ``last.ckpt``, whichever is newer) or its path; with
  :class:`ranklit.training.ResumableTraining` the resumed run equals the uninterrupted one. Under several processes
  only a ``SIGTERM`` (which Lightning hands to every rank at the same batch) is saved: an exception on one rank
  cannot wait for the others. SLURM's ``SIGUSR1`` requeue (``SLURMEnvironment(auto_requeue=True)``) writes Lightning's
  own ``hpc_ckpt_*.ckpt``, which holds the callbacks' state as well. A successful run removes this checkpoint.

Example:
    >>> import lightning as L
    >>> trainer = L.Trainer(callbacks=[FaultTolerance("checkpoints")], logger=False, enable_progress_bar=False)
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import OnExceptionCheckpoint
from lightning.pytorch.utilities import rank_zero_info
from lightning.pytorch.utilities.exceptions import SIGTERMException
from torch import Tensor
from typing_extensions import override

__all__ = ["FaultTolerance", "first_non_finite", "stopped_by_ctrl_c"]

_ctrl_c_stops: list[bool] = [False]  # set by the first Ctrl-C of a run (see `FaultTolerance`)


def stopped_by_ctrl_c() -> bool:
    """Whether the last run of this process was stopped by Ctrl-C through :class:`FaultTolerance`: Lightning then
    ends it as a ``SIGTERM`` stop (exit code 0), and the ``ranklit`` command exits with 130 instead, as an
    interrupted command does."""
    return _ctrl_c_stops[0]


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
    """

    def __init__(
        self,
        dirpath: str | Path,
        filename: str = "interrupted",
        check_every_n_steps: int = 1,
    ) -> None:
        super().__init__(dirpath, filename)
        if isinstance(check_every_n_steps, bool) or not isinstance(check_every_n_steps, int) or check_every_n_steps < 1:
            raise ValueError(f"`check_every_n_steps` must be a positive integer, got {check_every_n_steps!r}.")
        self.check_every_n_steps = check_every_n_steps
        self._previous_sigint: Any = None

    @override
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        _ctrl_c_stops[0] = False
        lightning_handles_sigterm = callable(signal.getsignal(signal.SIGTERM))
        if threading.current_thread() is threading.main_thread() and lightning_handles_sigterm:
            self._previous_sigint = signal.signal(signal.SIGINT, self._first_ctrl_c)

    def _first_ctrl_c(self, signum: int, frame: Any) -> None:
        self._restore_sigint()  # a second Ctrl-C raises KeyboardInterrupt at once
        _ctrl_c_stops[0] = True
        rank_zero_info("Ctrl-C: stopping after this batch to save an exact checkpoint (Ctrl-C again: stop now).")
        signal.raise_signal(signal.SIGTERM)  # Lightning's handler: stop at the end of the batch

    def _restore_sigint(self) -> None:
        if self._previous_sigint is not None:
            signal.signal(signal.SIGINT, self._previous_sigint)
            self._previous_sigint = None

    @override
    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._restore_sigint()

    def _due(self, trainer: L.Trainer) -> bool:
        return trainer.global_step % self.check_every_n_steps == 0

    @staticmethod
    def _stop(trainer: L.Trainer, what: str, name: str) -> None:
        raise FloatingPointError(
            f"Non-finite {what} `{name}` at global step {trainer.global_step} (epoch {trainer.current_epoch}): "
            "training stopped and no checkpoint is written with it. Lower the learning rate, clip gradients "
            "(`trainer.gradient_clip_val`), check the data, or try `--trainer.precision 32`."
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
        self._restore_sigint()
        if isinstance(exception, FloatingPointError):
            return  # the state holds non-finite numbers: keep the last good checkpoint
        if trainer.world_size > 1 and not isinstance(exception, SIGTERMException):
            rank_zero_info(f"{type(exception).__name__} on one of {trainer.world_size} processes: no checkpoint saved.")
            return
        trainer.save_checkpoint(self.ckpt_path)
        rank_zero_info(
            f"Training interrupted by {'Ctrl-C' if stopped_by_ctrl_c() else type(exception).__name__} at "
            f"global step {trainer.global_step}; "
            f"resumable checkpoint saved to {self.ckpt_path} (resume with `ckpt_path={self.ckpt_path!r}` or 'last')."
        )
