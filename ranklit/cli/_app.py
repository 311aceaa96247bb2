"""The ``ranklit`` command line: a LightningCLI over :class:`RetrievalModule` and :class:`RetrievalDataModule`.

``ranklit fit --config roadmap_inat.yaml --data.root /data/inat`` trains; ``validate``, ``test`` and ``predict``
evaluate or embed; ``--print_config`` prints the full resolved configuration; ``ranklit configs`` lists the shipped
configs. A bare config name (``--config quickstart.yaml``) that is not a file relative to the working directory is
taken from the shipped configs (the repository's ``configs/``, packaged in the wheel as ``ranklit/configs``), so the
commands work from any directory after ``pip install ranklit``. Unknown keys are rejected at parse time, inside the
``init_args`` of datasets, samplers, networks and losses too.

Before ``fit`` the untrained (or pretrained) model is validated once and its metrics are logged at step 0, the
baseline every curve starts from; ``--baseline_validation false`` switches it off. ``data.root`` is copied into the
``root`` of every dataset. Each run writes its resolved ``config.yaml`` into its own directory,
``<save_dir>/<name>/<version>/`` of the logger (where ``ModelCheckpoint`` puts ``checkpoints/`` too); that of a
``fit`` is a fresh-run config (:mod:`ranklit.cli._run_requests`).
``ranklit predict`` writes the embeddings, labels and dataset indices of the test split to the folder
``--predictions_path``, as numpy shards while it runs (:class:`ranklit.callbacks.EmbeddingWriter`).

Every ``fit`` is resumable: the CLI adds :class:`ranklit.callbacks.ResumableTraining` (sampler position, random states,
cross-batch memory in every checkpoint), :class:`ranklit.callbacks._locks.RunLock` (``run.lock``: one writer per run)
and, unless ``--trainer.enable_checkpointing false``, :class:`ranklit.callbacks.RunCheckpoint` (``last.ckpt`` on the
schedule of ``--checkpoint.every_n_steps``/``every_minutes``/``keep_latest``) and
:class:`ranklit.callbacks.FaultTolerance` (``interrupted.ckpt`` on a stop by signal or an exception; the stops of
:mod:`ranklit.training.stops`); with it, :class:`ranklit.callbacks._training_stops.TrainingStops` (the same stops,
no checkpoint). **Resuming is re-running the same command with** ``--resume true`` (or
``--ckpt_path last``): :mod:`ranklit.cli._resuming` finds the run and its newest checkpoint that loads, the run
logs into the same version (``metrics.csv`` is appended to, without the rows past the checkpoint) and skips the
baseline validation. A model setting (``--model.*``) that differs from the checkpoint's is refused, naming each key
(Lightning would silently replace it by the checkpoint's value). Exit codes: 0 finished, 1 an error, 2 bad input or a
refused resume (one line; the run's files unchanged), ``128 + n`` stopped by signal ``n`` (143 ``SIGTERM``, 130
Ctrl-C).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, cast

from lightning.pytorch import Callback, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from typing_extensions import override

from ranklit._compat.lightning import CheckpointSettingsCLI, replace_taken_names
from ranklit._injected import check_injected
from ranklit.callbacks import (
    RATE_SETTINGS,
    EmbeddingWriter,
    EvaluationStops,
    FaultTolerance,
    NewLearningRates,
    RankingGridLogger,
    ResumableTraining,
    ResumeRefused,
    RunCheckpoint,
    RunLock,
    TrainingStops,
    acquire_run_lock,
    count_rows,
    lock_output,
)
from ranklit.cli import _warning_filters as warning_filters
from ranklit.cli._checkpoint_settings import (
    EvaluatedCheckpoint,
    evaluated_checkpoint,
    report_training_settings,
    use_training_settings,
)
from ranklit.cli._checkpointing_off import drop_checkpoint_callbacks
from ranklit.cli._commands import COMMANDS, find, run
from ranklit.cli._config_files import RENAMED, renamed_keys, resolve_config_paths
from ranklit.cli._errors._surface import BUILD_ERRORS, ShortUsageParser, as_user_error, check_command_line, user_errors
from ranklit.cli._resuming import ResumeRequest, find_resume, rank_zero_process, refusals_and_stops, use_run_seed
from ranklit.cli._run_requests import check_run_options
from ranklit.cli._runs import RunConfigSaver, changed_settings, continue_metrics_csv, logged_steps, run_directory
from ranklit.cli._slurm import add_requeue_argument, set_up_slurm, trainer_plugins
from ranklit.cli._writable import check_writable
from ranklit.data import RetrievalDataModule
from ranklit.models import RetrievalModule
from ranklit.training import use_safe_checkpoint_io, watch_parent

__all__ = ["RanklitCLI", "main"]

_DATASETS = ("train_dataset", "val_dataset", "test_dataset", "gallery_dataset")
_CHECKPOINT_CONNECTOR = r"lightning\.pytorch\.trainer\.connectors\.checkpoint_connector"  # Lightning 2.5.5-2.6.6
_MOVED = {
    "optimizer": "--model.optimizer",
    "lr_scheduler": "--model.lr_scheduler",
}


class RanklitCLI(CheckpointSettingsCLI):
    """LightningCLI with ranklit's defaults: the run's config saved in its directory (:class:`RunConfigSaver`), no
    top-level ``--optimizer``/``--lr_scheduler`` (the module's ``optimizer``/``lr_scheduler`` keep its parameter
    groups), ``data.root`` copied into every dataset, a baseline validation before ``fit``, resumable and
    fault-tolerant ``fit`` runs (``--resume``; module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("save_config_callback", RunConfigSaver)
        kwargs.setdefault("auto_configure_optimizers", False)
        # ranklit's batch samplers split the batches between DDP ranks themselves (Lightning's would re-split them)
        kwargs.setdefault("trainer_defaults", {"use_distributed_sampler": False})
        kwargs.setdefault("parser_class", ShortUsageParser)
        super().__init__(*args, **kwargs)

    @override
    def instantiate_classes(self) -> None:
        """Build the run; a configured class's refusal of a value is a user error (ranklit.cli._errors._surface)."""
        try:
            super().instantiate_classes()
        except BUILD_ERRORS as error:
            raise as_user_error(error) from error

    @override
    def add_arguments_to_parser(self, parser) -> None:  # type: ignore[no-untyped-def]
        for name in _DATASETS:
            parser.link_arguments("data.root", f"data.{name}.init_args.root", apply_on="parse")
        # Always on; logs a grid of validation queries and their top-k only when the logger is wandb.
        parser.add_lightning_class_args(RankingGridLogger, "ranking_grid")
        parser.add_argument(
            "--baseline_validation",
            type=bool,
            default=True,
            help="Validate the model once before training and log its metrics at step 0.",
        )
        parser.add_argument(
            "--resume",
            type=bool | Literal["or_fresh"],  # ranklit.cli._resuming.OR_FRESH
            default=False,
            help="Continue the newest run from its most advanced checkpoint (none: start fresh; all damaged: "
            "refused, `or_fresh` starts fresh).",
        )
        parser.add_class_arguments(RunCheckpoint, "checkpoint", skip={"dirpath"}, instantiate=False)
        add_requeue_argument(parser)
        parser.add_argument(
            "--resume_new_rates",
            type=list[str],
            default=[],
            help="Learning rates a resume takes from the config.",
        )
        parser.add_argument(
            "--predictions_path",
            type=str,
            default="predictions",
            help="Folder where `ranklit predict` writes embeddings, labels and dataset indices (numpy shards).",
        )
        for name, key in _MOVED.items():
            parser.add_argument(f"--{name}", type=Any, default=None, help=f"Not used by ranklit: set {key}.")

    @override
    def add_subcommand_arguments(self, parser: Any, subcommand: str) -> None:
        if subcommand == "predict":
            parser.add_argument(
                "--overwrite",
                type=bool,
                default=False,
                help="Replace the predictions already in --predictions_path (refused otherwise).",
            )

    @override
    def before_instantiate_classes(self) -> None:
        config = self.config[self.subcommand]
        check_injected(config.as_dict())  # nothing configured is called before its type is checked
        if dropped := drop_checkpoint_callbacks(config.trainer):  # ranklit.cli._checkpointing_off
            sys.stderr.write(f"--trainer.enable_checkpointing false: left out {', '.join(dropped)}; this run writes "
                             "no checkpoint.\n")
        for name, key in _MOVED.items():
            if config.get(name) is not None:
                self.parser.error(
                    f"`--{name}` would replace ranklit's optimiser set-up and drop its parameter groups (backbone, "
                    f"head with `model.head_lr`, loss proxies with `model.loss_lr`): set `{key}` instead."
                )

    @override
    def before_checkpoint_settings(self) -> Any:
        """Find the run a ``fit`` resumes; keep the model settings given, to compare with the checkpoint's."""
        subcommand = self.config.get("subcommand")
        config = self.config[subcommand]
        check_run_options(config, subcommand)
        if subcommand != "fit":
            return evaluated_checkpoint(config)  # ranklit.cli._checkpoint_settings
        self.resumed = find_resume(config)
        if self.resumed is not None:
            use_run_seed(config, self.resumed)  # Lightning seeds the process next, with the run's seed
        return config.model.clone()

    @override
    def after_checkpoint_settings(self, before: Any) -> None:
        """Refuse a resume whose model settings differ from the checkpoint's (Lightning has just replaced them),
        except the rates named by ``--resume_new_rates``."""
        if isinstance(before, EvaluatedCheckpoint):  # test/validate/predict: the checkpoint's training settings
            use_training_settings(self.config[self.config["subcommand"]], before)
            self.evaluated = before
            return
        if before is None:
            return
        model, subcommand = before, self.config["subcommand"]
        config = self.config[subcommand]
        accepted = set(config.get("resume_new_rates") or [])
        if unknown := sorted(accepted - set(RATE_SETTINGS)):
            raise ResumeRefused(f"`--resume_new_rates` takes {', '.join(RATE_SETTINGS)}; got {', '.join(unknown)}.")
        changes = changed_settings(self.config[subcommand].model.as_dict(), model.as_dict())
        if refused := [change for change in changes if change.split(":")[0] not in accepted]:
            raise ResumeRefused(
                f"The model settings differ from those of the checkpoint {config.ckpt_path}: {'; '.join(refused)}"
                ". A resumed run continues the same model: use the settings of the interrupted run (only "
                "`trainer.*` settings such as max_epochs, devices, num_nodes may change; a learning rate with "
                "`--resume_new_rates '[KEY]'`), or start a new run."
            )
        for key in accepted:
            self.config[subcommand].model[key.removeprefix("model.")] = model[key.removeprefix("model.")]

    def after_instantiate_classes(self) -> None:
        """Name the config's settings a ``--ckpt_path`` evaluation does not use (ranklit.cli._checkpoint_settings)."""
        if (checked := getattr(self, "evaluated", None)) is not None:
            report_training_settings(checked, self.datamodule, str(self.subcommand))

    @override
    def instantiate_trainer(self, **kwargs: Any) -> Trainer:
        kwargs |= trainer_plugins(self.config_init[self.subcommand].trainer)  # SLURM: ranklit's SIGUSR1
        trainer = super().instantiate_trainer(**kwargs)
        use_safe_checkpoint_io(trainer)  # Lightning's restore of `ckpt_path` loads weights only (ranklit._checkpoint)
        callbacks: list[Callback] = trainer.callbacks  # type: ignore[attr-defined]  # set by Lightning's connector
        if self.subcommand in ("validate", "test"):
            callbacks.append(EvaluationStops())  # signals: exit 128 + n, no results claimed
        if self.subcommand != "fit":
            set_up_slurm(trainer, str(self.subcommand), self.config[self.subcommand])
            return trainer
        if not any(isinstance(c, ResumableTraining) for c in callbacks):
            callbacks.append(ResumableTraining())
        folder, resumed = run_directory(trainer), cast(ResumeRequest | None, getattr(self, "resumed", None))
        callbacks.append(RunLock(folder))
        if resumed and self.config[self.subcommand].get("resume_new_rates"):
            callbacks.append(NewLearningRates())
        if trainer.checkpoint_callback is not None:
            _add_checkpoints(callbacks, folder / "checkpoints", self.config[self.subcommand].get("checkpoint"),
                             resumed=resumed is not None)
        elif not any(isinstance(c, TrainingStops) for c in callbacks):
            callbacks.append(TrainingStops())  # no checkpoints: the stops (exit 128 + n) all the same
        set_up_slurm(trainer, self.subcommand, self.config[self.subcommand])  # may refuse: before the lock
        if rank_zero_process() and not getattr(trainer, "fast_dev_run", False):
            check_writable(folder, checkpoints=trainer.checkpoint_callback is not None)  # before anything is written
            acquire_run_lock(folder)  # a new run's folder (a resumed run's lock is already held: ranklit.cli._resuming)
        if resumed and trainer.is_global_zero and isinstance(trainer.logger, CSVLogger):
            continue_metrics_csv(trainer.logger, logged_steps(resumed.point.checkpoint))
        return trainer

    def before_fit(self) -> None:
        """Validate once before training (the step-0 baseline), unless resuming or switched off."""
        config = self.config[self.subcommand]
        if config.get("ckpt_path"):
            return  # a resumed run: its baseline was logged by the run that wrote the checkpoint
        # FaultTolerance is an OnExceptionCheckpoint, so Lightning reads `ckpt_path=None` as "last", warns that "the
        # last model of the previous fit call will be used", then that there is no last checkpoint. A fresh run's
        # directory has none (a resumed run passes its checkpoint explicitly): both warnings would only mislead.
        for message in (r"`\.fit\(ckpt_path=None\)` was called without a model",
                        r'\.fit\(ckpt_path="last"\) is set, but there is no last checkpoint'):
            warnings.filterwarnings("ignore", message=message, module=_CHECKPOINT_CONNECTOR)
        self.datamodule.check_batch_sampler()  # a bad sampler setting stops the run before the baseline validation
        if config.get("baseline_validation", True) and self.datamodule.val_dataset is not None:
            self.trainer.validate(self.model, datamodule=self.datamodule, verbose=False)

    def before_predict(self) -> None:
        """Add the writer of ``--predictions_path`` unless the config has one; predictions are written as they are
        computed, not also kept in memory (``return_predictions`` defaults to false)."""
        callbacks: list[Callback] = self.trainer.callbacks  # type: ignore[attr-defined]
        config = self.config[self.subcommand]
        if not any(isinstance(c, EmbeddingWriter) for c in callbacks):
            callbacks.append(EmbeddingWriter(config["predictions_path"], overwrite=config.get("overwrite", False)))
        for writer in callbacks:  # a refusal before the run folder is made (the run's logger makes it on setup)
            if isinstance(writer, EmbeddingWriter):
                writer.check_free()
        for writer in (c for c in callbacks if isinstance(c, EmbeddingWriter) and rank_zero_process()):
            lock_output(writer.path, "ranklit predict")  # one prediction per folder: a second one is refused
        if self.config_init[self.subcommand].get("return_predictions") is None:
            self.config_init[self.subcommand]["return_predictions"] = False

    def after_predict(self) -> None:
        """Say where the predictions are (one line on stdout, from rank 0): the folder and its number of rows."""
        for writer in self.trainer.callbacks:  # type: ignore[attr-defined]
            if isinstance(writer, EmbeddingWriter) and self.trainer.is_global_zero:
                sys.stdout.write(f"Predictions written to {writer.path}: {count_rows(writer.path)} rows.\n")


def _add_checkpoints(callbacks: list[Callback], folder: Path, settings: Any, resumed: bool = False) -> None:
    """The run's :class:`RunCheckpoint` (``--checkpoint.*``) and :class:`FaultTolerance` unless configured; a
    ``ModelCheckpoint`` of the same folder keeps only its best checkpoints (``last.ckpt`` is the schedule's).

    In a resumed run, a ``ModelCheckpoint`` whose file names hold the epoch or step replaces a file of the same name
    instead of writing a ``-v1`` copy beside it: that file was written after the checkpoint the run resumes from (by
    the run that was killed, for the same epoch and step), and the resumed run writes it again."""
    if not any(isinstance(c, RunCheckpoint) for c in callbacks):
        callbacks.append(RunCheckpoint(folder, **(settings.as_dict() if settings is not None else {})))
    if not any(isinstance(c, FaultTolerance) for c in callbacks):
        callbacks.append(FaultTolerance(folder))
    for callback in callbacks:
        if isinstance(callback, ModelCheckpoint) and callback.dirpath in (None, str(folder.resolve())):
            callback.save_last = False
            if resumed and any(field in (callback.filename or "") for field in ("{epoch", "{step")):
                replace_taken_names(callback)  # one save a step: a name taken is the killed run's


@contextmanager
def command_line(args: list[str]) -> Iterator[None]:
    """Run with ``sys.argv`` set to ``args``: LightningCLI then parses them as its own command line."""
    saved = sys.argv
    sys.argv = [saved[0] if saved else "ranklit", *args]
    try:
        yield
    finally:
        sys.argv = saved


def main(args: list[str] | None = None) -> None:
    """Entry point of the ``ranklit`` console script (``args`` default to the command line)."""
    args = resolve_config_paths(sys.argv[1:] if args is None else list(args))  # configs, data prepare: _dispatch
    watch_parent()  # a torchrun worker stops (exit 143, resumable) when its agent dies
    name = find(args)
    if name == "data check":
        with user_errors():
            check_command_line(args[1:])
            run(name, args[2:])
    if name is not None and COMMANDS[name].group == "deploy":  # `ranklit export`, `index`, `search`
        warning_filters.install(args)
        with user_errors(), refusals_and_stops():  # `ranklit index` stopped by a signal: 128 + n
            check_command_line(args)
            run(name, args[1:])
        return
    if old := renamed_keys(args):
        moves = "; ".join(f"`{key}` is now {RENAMED[key]}" for key in old)
        sys.stderr.write(f"error: keys of an older ranklit config: {moves}. See the configs of `ranklit configs`.\n")
        raise SystemExit(2)
    warning_filters.install(args)
    with command_line(args), user_errors(), refusals_and_stops():
        check_command_line(args)
        RanklitCLI(
            RetrievalModule,
            RetrievalDataModule,
            parser_kwargs={
                "description": "Train and evaluate retrieval models. `ranklit configs` lists the configs; "
                "`ranklit data check --config X` reads every image of a config's datasets; `ranklit data prepare NAME "
                "--root DIR` downloads and lays out a benchmark dataset; `ranklit export`, `ranklit index` and "
                "`ranklit search` turn a checkpoint into a search (each has --help)."
            },
        )

