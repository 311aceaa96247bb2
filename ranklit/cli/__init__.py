"""The ``ranklit`` command line (everything here is command-line code; nothing else in ranklit imports it).

- :mod:`ranklit.cli._dispatch` — what :func:`main` answers before importing Lightning (help, ``configs``, mistakes).
- :mod:`ranklit.cli._app` — :class:`RanklitCLI` (the LightningCLI subclass) and the commands behind :func:`main`.
- :mod:`ranklit.cli._config_files` — the shipped configs (``ranklit configs``) and the keys older configs used.
- :mod:`ranklit.cli._runs`, :mod:`ranklit.cli._resuming` — run folders, their saved config and ``--resume``.
- :mod:`ranklit.cli._interrupts` — Ctrl-C at any point: one line and exit 130.
- :mod:`ranklit.cli._slurm` — ``--requeue`` and ranklit's own handling of SLURM's ``SIGUSR1``.
- :mod:`ranklit.cli._errors._surface`, :mod:`ranklit.cli._warning_filters` — short errors, exit codes, quiet runs.
- :mod:`ranklit.cli._data_check` — ``ranklit data check``.
- :mod:`ranklit.cli._prepare_command` — ``ranklit data prepare``, the face of :func:`ranklit.data.prepare_dataset`.

The command needs the training stack (``pip install "ranklit[train]"``); the core install (losses, metrics) does not
have it, and :func:`main` then says so in one line (exit 2) instead of a traceback. This module imports nothing of the
training stack itself, so that check can run.
"""

from __future__ import annotations

import gc
import importlib.util
import sys
from typing import TYPE_CHECKING

from ranklit._lazy import lazy_exports

if TYPE_CHECKING:
    from ranklit.cli._app import RanklitCLI

__all__ = ["RanklitCLI", "main"]

# import name -> distribution, for the modules the command imports (the `train` extra of pyproject.toml)
TRAINING_STACK = {
    "lightning": "lightning",
    "timm": "timm",
    "torchvision": "torchvision",
    "jsonargparse": "jsonargparse",
    "PIL": "pillow",
    "yaml": "pyyaml",
    "matplotlib": "matplotlib",
}


def missing_training_stack() -> list[str]:
    """The distributions of the ``train`` extra that cannot be imported here (``[]`` when the command can run).

    >>> missing_training_stack()
    []
    """
    return [dist for module, dist in TRAINING_STACK.items() if importlib.util.find_spec(module) is None]


def main(args: list[str] | None = None) -> None:
    """Entry point of the ``ranklit`` console script (``args`` default to the command line).

    Without ``args`` (the console script, ``python -m ranklit.cli``: the process ends after the command) the
    command's garbage is collected once and the rest of the heap frozen (:func:`gc.freeze`) before Python's own
    finalisation, whose cyclic collections over the objects of torch, Lightning, timm and torchmetrics took 1.8 s of
    every command's exit (0.3 s left; issue 47). What the command opened it closes itself or through :mod:`atexit`
    (loggers, wandb, loader workers), which still runs; a caller passing ``args`` (a test, a notebook) keeps its
    collector as it was.
    """
    try:
        _dispatch_and_run(args)
    finally:
        if args is None:
            gc.collect()
            gc.freeze()


def _dispatch_and_run(args: list[str] | None) -> None:
    from ranklit.cli._dispatch import answer  # what needs no Lightning is answered first (issue 31: start-up time)

    if answer(sys.argv[1:] if args is None else list(args), training_stack=not missing_training_stack()):
        return
    if missing := missing_training_stack():
        sys.stderr.write(
            f"error: the `ranklit` command needs the training stack (missing here: {', '.join(missing)}); "
            "install it with: pip install \"ranklit[train]\"\n"
        )
        raise SystemExit(2)
    from ranklit.cli._interrupts import run_interruptible

    def run() -> None:  # the imports of the training stack included
        from ranklit.cli._app import main as run_command

        run_command(args)

    run_interruptible(run)


__getattr__, __dir__ = lazy_exports(__name__, {"RanklitCLI": "ranklit.cli._app"})  # it needs Lightning
