"""Lightning internals (and DDP's gradient-sync flag) that ranklit's training and command line need, each with the
versions it was checked against: Lightning 2.5.5 and 2.6.6, torch 2.14.1 (the range ``.ci/run`` tests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.trainer.connectors.signal_connector import _SignalConnector

__all__ = [
    "CheckpointSettingsCLI",
    "parse_only",
    "add_signal_handlers",
    "attached_trainer",
    "batch_progress",
    "checkpoint_batch_progress",
    "cluster_environment",
    "replace_taken_names",
    "request_stop",
    "skip_ddp_gradient_sync",
    "training_data_fetcher",
]


class _HookedSignalConnector(_SignalConnector):
    """Lightning's signal connector (``trainer._signal_connector``, which registers the signal handlers around
    ``fit``, ``validate``, ``test`` and ``predict``; private), calling ``register(trainer)`` after it registered its
    own handlers (those it keeps and restores at teardown, SLURM's ``SIGUSR1``)."""

    def __init__(self, trainer: Any, register: Callable[[Any], None]) -> None:
        super().__init__(trainer)
        self._register = register

    def register_signal_handlers(self) -> None:
        super().register_signal_handlers()
        self._register(self.trainer)


class CheckpointSettingsCLI(LightningCLI):
    """``LightningCLI`` with a hook around its replacement of the ``model`` settings by those saved in ``ckpt_path``.

    Lightning 2.5.5 added ``LightningCLI._parse_ckpt_path`` (it runs when the command is parsed, before any class is
    instantiated); on older versions the hyper-parameters of a checkpoint are not merged at all, which is why 2.5.5
    is ranklit's lower bound. Subclasses override :meth:`before_checkpoint_settings` (its return value is passed on)
    and :meth:`after_checkpoint_settings`, and :meth:`add_subcommand_arguments` for options of one subcommand.
    """

    def before_checkpoint_settings(self) -> Any:
        """Called before Lightning reads the checkpoint's settings into ``self.config``."""
        return None

    def after_checkpoint_settings(self, before: Any) -> None:
        """Called after, with what :meth:`before_checkpoint_settings` returned."""

    def _parse_ckpt_path(self) -> None:
        before = self.before_checkpoint_settings()
        super()._parse_ckpt_path()
        self.after_checkpoint_settings(before)

    def add_subcommand_arguments(self, parser: Any, subcommand: str) -> None:
        """Add the arguments of one subcommand (``fit``, ``predict``, ...) only, after the shared ones."""

    def _prepare_subcommand_parser(self, klass: type, subcommand: str, **kwargs: Any) -> Any:
        # LightningCLI._prepare_subcommand_parser (2.5.5-2.6.6) builds each subcommand's parser
        parser = super()._prepare_subcommand_parser(klass, subcommand, **kwargs)
        self.add_subcommand_arguments(parser, subcommand)
        return parser


def attached_trainer(module: Any) -> Any:
    """The ``Trainer`` a ``LightningModule`` is attached to, or ``None`` (``module.trainer`` raises when detached).

    Reads ``LightningModule._trainer``.
    """
    return module._trainer


def batch_progress(trainer: Any) -> Any:
    """The training epoch's batch progress: ``.current`` (``ready``/``started``/``processed``/``completed``
    counters) and ``.is_last_batch``. ``trainer.fit_loop.epoch_loop.batch_progress``: loop internals without a
    public accessor or a stability promise."""
    return trainer.fit_loop.epoch_loop.batch_progress


def training_data_fetcher(trainer: Any) -> Any:
    """Lightning's training iterator of the running epoch, created before ``on_train_start``
    (``trainer.fit_loop._data_fetcher``)."""
    return trainer.fit_loop._data_fetcher


def cluster_environment(trainer: Any) -> Any:
    """The trainer's cluster environment (SLURM, torchrun, Lightning's launcher, …) whatever the strategy
    (``trainer._accelerator_connector.cluster_environment``; ``strategy.cluster_environment`` exists on multi-process
    strategies only)."""
    return trainer._accelerator_connector.cluster_environment


def add_signal_handlers(trainer: Any, register: Callable[[Any], None]) -> None:
    """Call ``register(trainer)`` each time Lightning has registered its signal handlers for a run of ``trainer``
    (so the handlers ``register`` installs replace Lightning's, and Lightning restores the previous ones at
    teardown); once per trainer. Replaces ``trainer._signal_connector`` by a subclass of Lightning's."""
    if not isinstance(trainer._signal_connector, _HookedSignalConnector):
        trainer._signal_connector = _HookedSignalConnector(trainer, register)


def checkpoint_batch_progress(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """The training epoch's batch progress as saved in a checkpoint (``total``/``current`` counters and
    ``is_last_batch``): ``checkpoint["loops"]["fit_loop"]["epoch_loop.batch_progress"]``, the state-dict key of
    the loop internals behind :func:`batch_progress`, without a stability promise."""
    progress: dict[str, Any] = checkpoint["loops"]["fit_loop"]["epoch_loop.batch_progress"]
    return progress


def replace_taken_names(callback: Any) -> None:
    """Make a ``ModelCheckpoint`` write over a file of the name it saves to, rather than beside it as ``-v1``
    (``enable_version_counter=False`` after construction: ``callback._enable_version_counter``)."""
    callback._enable_version_counter = False


def request_stop(trainer: Any) -> None:
    """Set the flag Lightning's loops read to stop at the end of the current batch, as after a ``SIGTERM``
    (``trainer._signal_connector.received_sigterm``; the loops then raise ``SIGTERMException``)."""
    trainer._signal_connector.received_sigterm = True


def skip_ddp_gradient_sync(model: Any) -> None:
    """Stop ``DistributedDataParallel`` from all-reducing gradients in ``backward`` (the caller reduces them).

    Sets ``DistributedDataParallel.require_backward_grad_sync``, the flag ``no_sync()`` toggles, for good rather
    than for one ``with`` block (torch 2.14.1).
    """
    model.require_backward_grad_sync = False


def parse_only(cli_class: type[LightningCLI]) -> type[LightningCLI]:
    """``cli_class`` parsing and instantiating its command line as the command itself does, then running nothing:
    ``LightningCLI._run_subcommand`` (private; Lightning 2.5.5-2.6.6 call it at the end of ``__init__`` when a
    subcommand was given) is skipped. ``ranklit data check`` builds ``fit``'s datamodule with it."""

    class ParseOnly(cli_class):  # type: ignore[valid-type, misc]
        def _run_subcommand(self, subcommand: str) -> None:
            return None

    ParseOnly.__name__ = ParseOnly.__qualname__ = f"ParseOnly{cli_class.__name__}"
    return ParseOnly
