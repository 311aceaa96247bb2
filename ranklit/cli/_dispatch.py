"""What the ``ranklit`` command answers before it imports the training stack (Lightning, timm, torchvision, wandb).

Importing Lightning costs about twice ``import torch`` (it pulls in torchmetrics, torchvision, scipy, matplotlib and,
through timm, wandb), so :func:`answer` handles first, with the standard library and PyYAML only:

- ``ranklit``, ``ranklit -h``/``--help``: the list of every command (:data:`COMMANDS`);
- ``ranklit NAME`` for an unknown ``NAME``: one line naming it, the closest command and ``ranklit --help`` (exit 2);
- ``ranklit configs``, ``ranklit data prepare ...`` (its ``--help`` included) and the ``--help`` of ``ranklit export``,
  ``index`` and ``search``;
- a run command (``fit``, ``validate``, ``test``, ``predict``) given an option that none of its keys starts with,
  such as ``ranklit fit --nonsense`` or ``--trainr.max_epochs`` (exit 2; :data:`RUN_OPTIONS`).

Everything else (a run, ``ranklit fit --help``, a deeper key such as ``--trainer.nonsense``, ``data check``) goes to
the LightningCLI of :mod:`ranklit.cli._app`. ``benchmarks/startup.py`` times both paths against ``import torch``.
"""

from __future__ import annotations

import difflib
import importlib
import sys
from collections.abc import Callable
from typing import NoReturn

__all__ = ["COMMANDS", "RUN_OPTIONS", "answer", "overview", "unknown_option"]

COMMANDS = {  # command -> what it does; the groups of the overview are "run", "data", "deploy"
    "fit": ("run", "train a model from a config (`--resume true` continues an interrupted run)"),
    "validate": ("run", "evaluate a model on the validation set"),
    "test": ("run", "evaluate a model on the test set"),
    "predict": ("run", "write the embeddings of the test set (`--predictions_path`)"),
    "configs": ("data", "list the configs shipped with ranklit"),
    "data check": ("data", "read every image of a config's datasets before training"),
    "data prepare": ("data", "download, verify and lay out a benchmark dataset (`data prepare --help` lists them)"),
    "export": ("deploy", "write a trained network as ONNX or TorchScript, with its card"),
    "index": ("deploy", "embed a folder of images into a search index"),
    "search": ("deploy", "search an index with query images"),
}
"""Every ``ranklit`` command and its line in ``ranklit --help``."""

_EVERY_RUN = frozenset({
    "config", "print_config", "seed_everything", "trainer", "model", "data",  # LightningCLI's own
    "ranking_grid", "baseline_validation", "resume", "checkpoint", "resume_new_rates", "predictions_path",  # RanklitCLI
    "requeue",  # RanklitCLI under SLURM
    "optimizer", "lr_scheduler", "ckpt_path", "weights_only", "help",
})  # fmt: skip
RUN_OPTIONS = {
    "fit": _EVERY_RUN,
    "validate": _EVERY_RUN | {"verbose"},
    "test": _EVERY_RUN | {"verbose"},
    "predict": _EVERY_RUN | {"return_predictions", "overwrite"},
}
"""The first part of every key (``--KEY``, ``--KEY.sub``, ``--KEY+``) a run command's parser accepts: the top-level
options of ``ranklit COMMAND --help`` (a test compares them)."""

_TITLES = {
    "run": "Run a config (`--config FILE`, then `--KEY VALUE` overrides any of its keys)",
    "data": "Configs and data",
    "deploy": "Deploy a trained model (`--config` and `--ckpt_path` of its run)",
}


def overview() -> str:
    """The text of ``ranklit --help``: every command of :data:`COMMANDS`, by group.

    >>> [line.split()[0] for line in overview().splitlines() if line.startswith("  ")][:5]
    ['fit', 'validate', 'test', 'predict', 'configs']
    """
    width = max(map(len, COMMANDS))
    lines = ["usage: ranklit COMMAND [OPTIONS]", "", "Train and evaluate image-retrieval models by optimising ranking "
             "metrics.", "`ranklit COMMAND --help` lists the options of a command."]  # fmt: skip
    for group, title in _TITLES.items():
        rows = [f"  {name:<{width}}  {text}" for name, (kind, text) in COMMANDS.items() if kind == group]
        lines += ["", f"{title}:", *rows]
    return "\n".join([*lines, "", "Start with: ranklit fit --config quickstart.yaml", ""])


def _unknown_command(name: str) -> str:
    commands = sorted({command.split()[0] for command in COMMANDS})
    close = difflib.get_close_matches(name, commands, n=1)
    hint = f"did you mean `ranklit {close[0]}`? " if close else ""
    return f"`{name}` is not a ranklit command: {hint}The commands are {', '.join(commands)} (`ranklit --help`)."


def unknown_option(command: str, args: list[str]) -> str | None:
    """The message for the first ``--KEY`` of ``args`` (after ``command``) whose first part no key of the run
    ``command`` has (:data:`RUN_OPTIONS`), else ``None``; values and deeper keys are left to the parser.

    >>> unknown_option("fit", ["--config", "quickstart.yaml", "--trainer.max_epochs=2", "--resume_new_rates+", "x"])
    >>> unknown_option("fit", ["--trainr.max_epochs", "2"])  # doctest: +ELLIPSIS
    '`--trainr.max_epochs` is not an option of `ranklit fit`: did you mean `--trainer...`? ...'
    """
    known = RUN_OPTIONS[command]
    for arg in args:
        if not arg.startswith("--") or arg == "--":
            continue
        head = arg[2:].split("=", 1)[0].split(".", 1)[0].rstrip("+")
        if head in known:
            continue
        close = difflib.get_close_matches(head, sorted(known), n=1)
        hint = f"did you mean `--{close[0]}...`? " if close else ""
        return (
            f"`{arg.split('=', 1)[0]}` is not an option of `ranklit {command}`: {hint}Its options are "
            f"{', '.join(f'--{key}' for key in sorted(known - {'help'}))} and their keys "
            f"(all of them: `ranklit {command} --help`)."
        )
    return None


def _refuse(message: str) -> NoReturn:
    sys.stderr.write(f"error: {message}\n")
    raise SystemExit(2)


def _lean(run: Callable[[], None]) -> bool:
    """Run a command that needs no Lightning; its errors go through :func:`ranklit.cli._error_surface.user_errors`,
    imported only then (that module needs Lightning for the run commands' parser)."""
    try:
        run()
    except Exception:
        from ranklit.cli._error_surface import user_errors

        with user_errors():
            raise
    return True


def answer(args: list[str], training_stack: bool = True) -> bool:
    """Answer the command line ``args`` when it needs no Lightning (module docstring); ``False``: not answered, the
    LightningCLI runs it. Without the ``training_stack`` installed, only the overview and unknown commands are
    answered. Exits 2 on a mistake in the command or a run command's option."""
    first = args[0] if args else None
    if first is None:
        sys.stderr.write(overview())
        raise SystemExit(2)
    if first in ("-h", "--help"):
        sys.stdout.write(overview())
        raise SystemExit(0)  # as argparse's --help
    if first.startswith("-"):
        return False  # LightningCLI's options before the command (`ranklit -c CONFIG fit`, `--print_config`)
    if first not in {command.split()[0] for command in COMMANDS}:
        _refuse(_unknown_command(first))
    if not training_stack:
        return False
    if first == "configs":
        from ranklit.cli._config_files import print_configs

        print_configs()
        return True
    if args[:2] == ["data", "prepare"]:
        from ranklit.cli import _prepare_command as prepare

        return _lean(lambda: prepare.main(args[2:]))
    if first in RUN_OPTIONS and (problem := unknown_option(first, args[1:])):
        _refuse(problem)
    if first in ("export", "index", "search") and {"-h", "--help"} & set(args):
        importlib.import_module(f"ranklit.cli._{first}_command").main(args[1:])  # argparse prints the help, exits 0
        return True
    return False
