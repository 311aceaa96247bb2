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
import sys
from collections.abc import Callable
from typing import NoReturn

from ranklit.cli._commands import COMMANDS, closest, find, run

__all__ = ["RUN_OPTIONS", "answer", "overview", "unknown_option"]


_EVERY_RUN = frozenset({
    "config", "print_config", "seed_everything", "trainer", "model", "data",  # LightningCLI's own
    "ranking_grid", "baseline_validation", "resume", "checkpoint", "resume_new_rates", "predictions_path",  # RanklitCLI
    "requeue",  # RanklitCLI under SLURM
    "optimizer", "lr_scheduler", "ckpt_path", "weights_only", "help",
})
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
             "metrics.", "`ranklit COMMAND --help` lists the options of a command."]
    for group, title in _TITLES.items():
        rows = [f"  {name:<{width}}  {c.summary}" for name, c in COMMANDS.items() if c.group == group]
        lines += ["", f"{title}:", *rows]
    return "\n".join([*lines, "", "Start with: ranklit fit --config quickstart.yaml", ""])


def _unknown_command(name: str) -> str:
    commands = sorted({command.split()[0] for command in COMMANDS})
    close = closest(name)
    hint = f"did you mean `ranklit {close}`? " if close else ""
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


def _words(first: str, rest: list[str]) -> NoReturn:
    """The answer to ``ranklit FIRST ...`` where FIRST is the first word of two-word commands only: their list
    (exit 0 for ``--help``, 2 when nothing follows), or the closest of them to a mistyped second word (exit 2)."""
    names = [name for name in COMMANDS if name.startswith(f"{first} ")]
    listing = "\n".join(f"  {name}  {COMMANDS[name].summary}" for name in names)
    if not rest or rest[0] in ("-h", "--help"):
        text = f"usage: ranklit {first} {{{','.join(n.split()[1] for n in names)}}} ...\n\n{listing}\n"
        (sys.stdout if rest else sys.stderr).write(text)
        raise SystemExit(0 if rest else 2)
    close = closest(rest[0], f"{first} ")
    hint = f"did you mean `ranklit {close}`? " if close else ""
    _refuse(f"`{first} {rest[0]}` is not a ranklit command: {hint}The `{first}` commands are "
            f"{', '.join(f'`{n}`' for n in names)} (`ranklit {first} --help`).")


def _refuse(message: str) -> NoReturn:
    sys.stderr.write(f"error: {message}\n")
    raise SystemExit(2)


def _lean(run: Callable[[], None]) -> bool:
    """Run a command that needs no Lightning; its errors go through :func:`ranklit.cli._errors._surface.user_errors`,
    imported only then (that module needs Lightning for the run commands' parser)."""
    try:
        run()
    except Exception:
        from ranklit.cli._errors._surface import user_errors

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
    name = find(args)
    if name is None and first not in COMMANDS:  # `ranklit data`, `ranklit data --help`, `ranklit data prepar`
        _words(first, args[1:])
    if name is not None and COMMANDS[name].lean == "all":  # `ranklit configs`, `ranklit data prepare ...`
        return _lean(lambda: run(name, args[len(name.split()) :]))
    if first in RUN_OPTIONS and (problem := unknown_option(first, args[1:])):
        _refuse(problem)
    if name is not None and COMMANDS[name].lean == "help" and {"-h", "--help"} & set(args):
        run(name, args[1:])  # argparse prints the help, exits 0
        return True
    return False
