"""``ranklit test``/``validate``/``predict --ckpt_path``: the checkpoint is evaluated as it was trained.

A network is only as good as the images it is fed: the same checkpoint fed images of another size or normalisation
gives another (lower) figure, with exit code 0. So an evaluation of a checkpoint uses the settings the checkpoint was
trained with, whatever the config given (``folder.yaml`` as in "Getting started" or the run's own ``config.yaml``):

- the ``model`` settings are the checkpoint's hyper-parameters (Lightning's ``LightningCLI`` replaces them; the
  evaluation-only ``model.eval_scales`` and ``model.landmarks`` stay the config's), the network's initial weights
  excepted: it is built with ``pretrained: false, weights: null`` (:func:`ranklit._checkpoint.offline_rebuild`), the
  checkpoint's weights replacing them, so the evaluation needs neither the Hugging Face Hub nor the run's weights
  file (nor is a difference in these two named);
- the evaluation preprocessing ``data.resize_size``, ``crop_size``, ``mean``, ``std`` is the one recorded in the
  checkpoint (:mod:`ranklit.data._recorded`; the run's ``config.yaml`` for an older checkpoint).

Every value that differs from the config given is named in one line on stderr before the run starts (``key:
checkpoint A, config B``; of the model, the settings the figures depend on: ``model.net``, ``model.metric``; the
preprocessing where an evaluated dataset is prepared by ranklit's evaluation transform, not one with its own such as
:class:`ranklit.landmarks.RevisitedTestSet`); what the config chooses otherwise (the datasets, ``data.root``, batch
size, workers, trainer) is used as given. A checkpoint that records no preprocessing (an older one outside its run
folder) is evaluated with the config's, and that line says so. The checkpoint is read by the one weights-only loader
(:mod:`ranklit._checkpoint`): a hostile or unreadable file stops the command in one line naming it, and so do
hyper-parameters that name a function where a class is expected (``model.optimizer: os.system``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from ranklit._checkpoint import REBUILT, load_checkpoint, offline_rebuild
from ranklit._injected import check_injected
from ranklit.cli._runs import changed_settings
from ranklit.data import PREPROCESSING, CropFirst, recorded_preprocessing
from ranklit.errors import UserError

__all__ = ["EvaluatedCheckpoint", "evaluated_checkpoint", "report_training_settings", "use_training_settings"]


_EVALUATED = ("model.net.", "model.metric.")  # the model settings a figure depends on (not optimiser, loss, ...)
_INITIAL_WEIGHTS = tuple(f"model.net.init_args.{key}:" for key in REBUILT)  # replaced by the checkpoint's weights


@dataclass
class EvaluatedCheckpoint:
    """The ``--ckpt_path`` of an evaluation, the config's ``model`` settings, the recorded preprocessing, and the
    differences found (:func:`use_training_settings`)."""

    path: str
    model: Any
    preprocessing: tuple[dict[str, Any], str] | None
    given: dict[str, Any] = field(default_factory=dict)
    model_changes: list[str] = field(default_factory=list)
    data_changes: list[str] = field(default_factory=list)


def evaluated_checkpoint(config: Any) -> EvaluatedCheckpoint | None:
    """Read ``config.ckpt_path`` (weights only) before Lightning replaces the model settings; ``None`` without it."""
    path = config.get("ckpt_path")
    if not path or path in ("last", "best", "hpc", "registry"):  # Lightning's names of the run's own checkpoints
        return None
    checkpoint = load_checkpoint(path)  # one line naming a missing, hostile or unreadable file
    return EvaluatedCheckpoint(str(path), config.model.clone(), recorded_preprocessing(checkpoint, path))


def use_training_settings(config: Any, checked: EvaluatedCheckpoint) -> None:
    """Set the recorded preprocessing into ``config.data`` and note what differs from the config given
    (:func:`report_training_settings` prints it); first refuse hyper-parameters that would call something else than
    their key's kind of class (they are a config: :func:`ranklit._injected.check_injected`), naming the file."""
    try:
        check_injected({"model": config.model.as_dict()})
    except UserError as error:
        raise UserError(f"{checked.path}: refused: its hyper-parameters: {error}") from None
    changes = changed_settings(config.model.as_dict(), checked.model.as_dict())
    checked.model_changes = [change for change in changes if change.startswith(_EVALUATED)
                             and not change.startswith(_INITIAL_WEIGHTS)]
    net = config.model.get("net")
    if net is not None and (init_args := net.get("init_args")) is not None:
        offline_rebuild(init_args)  # the checkpoint holds the weights: no hub, no initial weights file
    given = {name: config.data.get(name) for name in PREPROCESSING}
    checked.given = {name: list(value) if isinstance(value, tuple) else value for name, value in given.items()}
    if checked.preprocessing is not None:
        recorded, source = checked.preprocessing
        for change in changed_settings(recorded, checked.given, prefix="data"):
            checked.data_changes.append(change.replace(": checkpoint ", f": {source.replace('the ', '')} ", 1))
        for name in PREPROCESSING:
            config.data[name] = recorded[name]


def report_training_settings(checked: EvaluatedCheckpoint, datamodule: Any, subcommand: str) -> None:
    """One line on stderr naming each setting of the config that the evaluation does not use (module docstring);
    the preprocessing only where an evaluated dataset is prepared by ranklit's evaluation transform."""
    names = ("val_dataset",) if subcommand == "validate" else ("test_dataset", "val_dataset", "gallery_dataset")
    prepared = any(isinstance(getattr(getattr(datamodule, n, None), "transform", None), CropFirst) for n in names)
    changes = [*checked.model_changes, *(checked.data_changes if prepared else [])]
    if prepared and checked.preprocessing is None:
        shown = ", ".join(f"data.{name} {value!r}" for name, value in checked.given.items())
        sys.stderr.write(f"ranklit {subcommand}: {checked.path} does not record the image size and normalisation it "
                         f"was trained with (an older checkpoint outside its run folder): evaluated with the "
                         f"config's {shown}.\n")
    if changes:
        sys.stderr.write(f"ranklit {subcommand}: {checked.path} is evaluated with the settings it was trained with, "
                         f"not the config's: {'; '.join(changes)}.\n")
