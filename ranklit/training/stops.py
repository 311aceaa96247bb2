"""Stops by signal that never hang a multi-process run: a flag per process, agreed on by all at a training batch end.

Lightning's own ``SIGTERM`` handler forwards the signal to the launcher's children and runs a collective
(``broadcast``) inside the handler, whichever collective the other processes are in at that moment: a ``SIGTERM``
sent to every process of a DDP run (what a scheduler or ``docker stop`` does) deadlocks it. :class:`StopSignals`
replaces the handlers of ``SIGTERM``, ``SIGINT`` (Ctrl-C) and ``SIGUSR1`` (unless SLURM's auto-requeue uses it),
and of ``SIGHUP`` (a closed terminal or SSH session) unless it is ignored (``nohup``): the handler only records the
request. :func:`agree_to_stop`, called by :class:`ranklit.callbacks.FaultTolerance` at
the end of a training batch and of a training epoch, combines the requests of all processes (one ``all_reduce`` of a
single integer, the largest signal number) so that every process stops after the same batch, wherever the signal
was sent (one process or all of them):

* a request during a training batch stops the run at the end of that batch (Lightning's ``SIGTERMException``, after
  which ``FaultTolerance`` saves ``interrupted.ckpt``), except the last batch of an epoch;
* a request during the last batch of an epoch or during a validation lets the epoch finish: its validation, its
  ``metrics.csv`` rows and its epoch-end checkpoint (:class:`ranklit.callbacks.RunCheckpoint`), then stops;
* a request during the step-0 baseline validation is kept: the run stops at the end of its first training batch;
* a second Ctrl-C raises ``KeyboardInterrupt`` at once (no checkpoint is then written: the state may be mid-step).

:func:`exit_code` is ``128 + signal number`` after a stop (143 for ``SIGTERM``, 130 for Ctrl-C, 138 for
``SIGUSR1``, 129 for ``SIGHUP``), as a shell reports a command killed by that signal, so a job script tells a
preemption from success.

Example:
    >>> import signal
    >>> exit_code() is None, 128 + signal.SIGTERM
    (True, 143)
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType
from typing import Any

import lightning as L
import torch
import torch.distributed as dist
from lightning.pytorch.plugins.environments import SLURMEnvironment
from lightning.pytorch.utilities.exceptions import SIGTERMException

from ranklit._compat.lightning import add_signal_handlers, cluster_environment, request_stop

__all__ = ["StopSignals", "agree_to_stop", "exit_code", "record_stop", "stop_requested", "stopped_by"]

# The signal this process was asked to stop by (`requested`, kept from the baseline validation into `fit`), and the
# signal that did stop its last run (`stopped`): module state, as signals are.
_signals: dict[str, int | None] = {"requested": None, "stopped": None}
_saves = {"checkpoint": True}  # whether the trainer whose handlers are installed saves a checkpoint on a stop


def stop_requested() -> int | None:
    """The number of the stop signal this process received and has not acted on yet, or ``None``."""
    return _signals["requested"]


def stopped_by() -> int | None:
    """The number of the signal that stopped the last run of this process, or ``None``."""
    return _signals["stopped"]


def exit_code() -> int | None:
    """``128 + n`` when signal ``n`` stopped the last run of this process (module docstring), else ``None``."""
    stopped = stopped_by()
    return None if stopped is None else 128 + stopped


def mark_stopped(signum: int | None) -> None:
    """Record that ``signum`` stopped the run (``None``: a new run starts and nothing stopped it yet)."""
    _signals["stopped"] = signum
    if signum is not None:
        _signals["requested"] = None


def record_stop(exception: BaseException) -> int | None:
    """Record the stop an exception ending a run stands for (:func:`mark_stopped`) and return its signal: ``SIGINT``
    for a second Ctrl-C's ``KeyboardInterrupt``, the signal agreed on (``SIGTERM`` by default) for Lightning's
    ``SIGTERMException``; ``None`` for any other exception (nothing recorded).

    Example:
        >>> record_stop(KeyboardInterrupt()) == signal.SIGINT, exit_code()
        (True, 130)
        >>> mark_stopped(None); record_stop(ValueError()) is None
        True
    """
    signum: int | None = None
    if isinstance(exception, KeyboardInterrupt):
        signum = signal.SIGINT
    elif isinstance(exception, SIGTERMException):
        signum = stop_requested() or signal.SIGTERM
    if signum is not None:
        mark_stopped(signum)
    return signum


def _request(signum: int, frame: FrameType | None) -> None:
    if signum == signal.SIGINT and _signals["requested"] == signal.SIGINT:
        raise KeyboardInterrupt  # a second Ctrl-C: stop now
    if _signals["requested"] is None:
        _signals["requested"] = signum
        name = signal.Signals(signum).name
        again = " (Ctrl-C again: stop at once, without a checkpoint)" if signum == signal.SIGINT else ""
        saved = "`fit` saves a checkpoint there" if _saves["checkpoint"] else "checkpointing is off: nothing is saved"
        sys.stderr.write(f"{name}: stopping at the next consistent point ({saved}){again}.\n")


def agree_to_stop(trainer: L.Trainer) -> bool:
    """Whether any process of the run asked to stop: the largest requested signal number over all processes (one
    ``all_reduce`` under DDP, so every process must call it at the same point). On ``True`` every process records
    that signal and Lightning's ``received_sigterm`` is set, so Lightning raises its ``SIGTERMException`` at the end
    of the current batch or epoch."""
    requested = _signals["requested"] or 0
    if dist.is_available() and dist.is_initialized() and trainer.world_size > 1:
        flag = torch.tensor([requested], device=trainer.strategy.root_device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        requested = int(flag.item())
    if requested:
        _signals["requested"] = requested
        request_stop(trainer)  # Lightning's flag, read by its loops
    return bool(requested)


class StopSignals:
    """The collective-free handlers (module docstring), installed on a trainer by :meth:`install`."""

    @classmethod
    def install(cls, trainer: L.Trainer) -> None:
        """Give ``trainer`` these handlers (once), in place of those Lightning registers for ``fit``/``validate``
        (Lightning's previous handlers, SLURM's ``SIGUSR1``, are kept and restored at teardown)."""
        add_signal_handlers(trainer, _register_handlers)


def _register_handlers(trainer: L.Trainer) -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    _saves["checkpoint"] = trainer.checkpoint_callback is not None  # `--trainer.enable_checkpointing false`: none
    environment: Any = cluster_environment(trainer)
    requeue = isinstance(environment, SLURMEnvironment) and environment.auto_requeue
    hangup = (signal.SIGHUP,) if signal.getsignal(signal.SIGHUP) == signal.SIG_DFL else ()  # `nohup` ignores it
    for signum in (signal.SIGTERM, signal.SIGINT, *(() if requeue else (signal.SIGUSR1,)), *hangup):
        signal.signal(signum, _request)
