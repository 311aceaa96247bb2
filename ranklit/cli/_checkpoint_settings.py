"""``ranklit test``/``validate``/``predict --ckpt_path``: the checkpoint is evaluated as it was trained.

A network is only as good as the images it is fed: the same checkpoint fed images of another size or normalisation
gives another (lower) figure, with exit code 0. So an evaluation of a checkpoint uses the settings the checkpoint was
trained with, whatever the config given (``folder.yaml`` as in "Getting started" or the run's own ``config.yaml``):

- the ``model`` settings are the checkpoint's hyper-parameters (Lightning's ``LightningCLI`` replaces them; the
  evaluation-only ``model.eval_scales`` and ``model.landmarks`` stay the config's);
- the evaluation preprocessing ``data.resize_size``, ``crop_size``, ``mean``, ``std`` is the one recorded in the
  checkpoint (:mod:`ranklit.data._recorded`; the run's ``config.yaml`` for an older checkpoint).

Every value that differs from the config given is named in one line on stderr before the run starts (``key:
checkpoint A, config B``); what the config chooses otherwise (the datasets, ``data.root``, batch size, workers,
trainer) is used as given. A checkpoint that records no preprocessing (an older one outside its run folder) is
evaluated with the config's, and that line says so. The checkpoint is read by the one weights-only loader
(:mod:`ranklit._checkpoint`): a hostile or unreadable file stops the command in one line naming it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from ranklit._checkpoint import load_checkpoint
from ranklit.cli._runs import changed_settings
from ranklit.data._recorded import PREPROCESSING, recorded_preprocessing

__all__ = ["EvaluatedCheckpoint", "evaluated_checkpoint", "use_training_settings"]


@dataclass
class EvaluatedCheckpoint:
    """The ``--ckpt_path`` of an evaluation, the config's ``model`` settings and the recorded preprocessing."""

    path: str
    model: Any
    preprocessing: tuple[dict[str, Any], str] | None


def evaluated_checkpoint(config: Any) -> EvaluatedCheckpoint | None:
    """Read ``config.ckpt_path`` (weights only) before Lightning replaces the model settings; ``None`` without it."""
    path = config.get("ckpt_path")
    if not path or path in ("last", "best", "hpc", "registry"):  # Lightning's names of the run's own checkpoints
        return None
    checkpoint = load_checkpoint(path)  # one line naming a missing, hostile or unreadable file
    return EvaluatedCheckpoint(str(path), config.model.clone(), recorded_preprocessing(checkpoint, path))


def use_training_settings(config: Any, checked: EvaluatedCheckpoint, subcommand: str) -> None:
    """Set the recorded preprocessing into ``config.data`` and say on stderr what differs from the config given."""
    changes = changed_settings(config.model.as_dict(), checked.model.as_dict())
    given = {name: config.data.get(name) for name in PREPROCESSING}
    given = {name: list(value) if isinstance(value, tuple) else value for name, value in given.items()}
    if checked.preprocessing is None:
        shown = ", ".join(f"data.{name} {value!r}" for name, value in given.items())
        sys.stderr.write(f"ranklit {subcommand}: {checked.path} does not record the image size and normalisation it "
                         f"was trained with (an older checkpoint outside its run folder): evaluated with the "
                         f"config's {shown}.\n")  # fmt: skip
    else:
        recorded, source = checked.preprocessing
        changes += changed_settings(recorded, given, prefix="data")
        for name in PREPROCESSING:
            config.data[name] = recorded[name]
        if source != "the checkpoint":
            changes = [change.replace(": checkpoint ", f": {source} ", 1) if change.startswith("data.") else change
                       for change in changes]  # fmt: skip
    if changes:
        sys.stderr.write(f"ranklit {subcommand}: {checked.path} is evaluated with the settings it was trained with, "
                         f"not the config's: {'; '.join(changes)}.\n")  # fmt: skip
