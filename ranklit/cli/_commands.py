"""Every ``ranklit`` command, declared once: its group and line in ``ranklit --help``, the module whose
``main(args)`` runs it (``args``: what follows the command's words) and how much of it is answered before Lightning
is imported. Both dispatchers read this table: :func:`ranklit.cli._dispatch.answer` (before Lightning) and
:func:`ranklit.cli._app.main` (the LightningCLI's side). A new command is one row here and its module
(CONTRIBUTING "Adding a command").

Example:
    >>> find(["data", "prepare", "cub", "--root", "x"])
    'data prepare'
    >>> find(["fit", "--config", "q.yaml"]), find(["nonsense"])
    ('fit', None)
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass
from typing import Literal

__all__ = ["COMMANDS", "Command", "closest", "find", "run"]


@dataclass(frozen=True)
class Command:
    """One command: ``group`` (``run``, ``data`` or ``deploy``: its section of ``ranklit --help``), ``summary`` (its
    line there), ``module`` (runs it with ``main(args)``; ``None``: a run command of the LightningCLI) and ``lean``
    (``"all"``: answered before Lightning is imported, ``"help"``: only its ``--help`` is, ``"none"``)."""

    group: Literal["run", "data", "deploy"]
    summary: str
    module: str | None = None
    lean: Literal["all", "help", "none"] = "none"


COMMANDS = {
    "fit": Command("run", "train a model from a config (`--resume true` continues an interrupted run)"),
    "validate": Command("run", "evaluate a model on the validation set"),
    "test": Command("run", "evaluate a model on the test set"),
    "predict": Command("run", "write the embeddings of the test set (`--predictions_path`)"),
    "configs": Command("data", "list the configs shipped with ranklit", "ranklit.cli._config_files", "all"),
    "check gpu": Command(
        "data", "check the Triton kernels and the device decoder on this GPU, print a verdict table",
        "ranklit.cli._check_gpu_command", "all",
    ),
    "data check": Command("data", "read every image of a config's datasets before training", "ranklit.cli._data_check"),
    "data prepare": Command(
        "data",
        "download, verify and lay out a benchmark dataset (`data prepare --help` lists them)",
        "ranklit.cli._prepare_command",
        "all",
    ),
    "export": Command(
        "deploy", "write a trained network as ONNX or TorchScript, with its card", "ranklit.cli._export_command", "help"
    ),
    "index": Command("deploy", "embed a folder of images into a search index", "ranklit.cli._index_command", "help"),
    "search": Command("deploy", "search an index with query images", "ranklit.cli._search_command", "help"),
}
"""Every ``ranklit`` command (one or two words) and how it runs."""


def find(args: list[str]) -> str | None:
    """The command ``args`` start with (its longest name), or ``None``."""
    for words in (2, 1):
        name = " ".join(args[:words])
        if len(args) >= words and name in COMMANDS:
            return name
    return None


def closest(name: str, prefix: str = "") -> str | None:
    """The command whose name is closest to ``prefix + name`` (a typo), or ``None``.

    >>> closest("prepar", "data "), closest("fitt")
    ('data prepare', 'fit')
    """
    names = sorted({c if prefix else c.split()[0] for c in COMMANDS if c.startswith(prefix)})
    found = difflib.get_close_matches(prefix + name, names, n=1)
    return found[0] if found else None


def run(name: str, args: list[str]) -> None:
    """Run the command ``name`` with the ``args`` after its words (its module's ``main``)."""
    module = COMMANDS[name].module
    if module is None:
        raise ValueError(f"`ranklit {name}` is a run command of the LightningCLI, not a module's main")
    importlib.import_module(module).main(args)
