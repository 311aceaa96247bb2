"""One error surface for the ``ranklit`` command line: a user's mistake is a few lines and exit code 2.

What counts as the user's mistake, found as early as possible:

- **before parsing** (:func:`check_command_line`): a run command without a config (``ranklit fit``, ``ranklit test
  --ckpt_path X``: the message names the run's ``config.yaml`` when the checkpoint sits in a run directory), a config
  file that is empty, not a mapping, or not valid YAML (file, line and column, tabs named as such), or a checkpoint
  given as ``--config`` (``ranklit test --config last.ckpt``: named as one, with the ``--ckpt_path`` line);
- **while parsing**: jsonargparse's own errors (unknown key, wrong type), with a one-line usage instead of the
  80-line one (:class:`ShortUsageParser`);
- **while building the run** (datasets, sampler, model, trainer): a ``ValueError``/``TypeError`` raised by a
  configured class's validation or Lightning's ``MisconfigurationException`` (:func:`as_user_error`: the innermost
  message, without jsonargparse's "Does not validate against any of the Union subtypes" dump);
- **at any time**: a :class:`ranklit.errors.UserError` (e.g. a dataset's index problems, an unreadable image, in the
  main process or a loader worker), a ``FileNotFoundError``, a permission denied, a refused checkpoint
  (:mod:`ranklit.cli._errors._causes`); Ctrl-C is one line and exit code 130 (:func:`ranklit.cli.main`).

:func:`user_errors` prints ``error: <message>`` and exits with code 2; anything else keeps its traceback. Set
``RANKLIT_TRACEBACK=1`` to see the traceback of a user error too.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import yaml
from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.pytorch.cli import LightningArgumentParser

from ranklit.cli._brief_help import brief_help, full_help_asked, is_run_parser
from ranklit.cli._errors._causes import chain, user_message
from ranklit.cli._errors._parser_messages import parser_message
from ranklit.errors import UserError

__all__ = ["BUILD_ERRORS", "ShortUsageParser", "as_user_error", "check_command_line", "missing_config", "user_errors"]

_RUNS = ("fit", "validate", "test", "predict")
BUILD_ERRORS = (ValueError, TypeError, MisconfigurationException)
"""What a configured class raises for a bad value while the run is built (turned into a :class:`UserError`)."""


class ShortUsageParser(LightningArgumentParser):
    """The CLI's parser, whose errors come with a one-line usage (the full one lists every option), and which takes
    no abbreviated key: argparse's prefix matching made ``--trainer.max_epoch 3`` set ``max_epochs`` silently, so a
    typo could change another setting than the one meant."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def format_help(self, *args: Any) -> str:
        """The run commands' ``--help``: the options a new run sets; ``--help all``: every option
        (:mod:`ranklit.cli._brief_help`)."""
        if full_help_asked(sys.argv) or not is_run_parser(self):
            return super().format_help(*args)
        return brief_help(self, lambda: super(ShortUsageParser, self).format_help(*args))

    def print_usage(self, file: Any = None) -> None:
        prog = self.prog.replace(" [options]", "")
        (file or sys.stderr).write(f"usage: {prog} --config CONFIG [--KEY VALUE ...] (all options: {prog} --help)\n")

    def error(self, message: str, ex: Exception | None = None) -> NoReturn:
        """jsonargparse's error, made one useful line where ranklit knows how (a class named by an old path, an option
        of another command: :func:`ranklit.cli._errors._parser_messages.parser_message`)."""
        super().error(parser_message(message) + self._closest_key(message), ex)

    def _closest_key(self, message: str) -> str:
        """``". Did you mean `--KEY`?"`` for the first unrecognised ``--key`` of ``message`` close to one of this
        parser's keys, else ``""`` (the top-level options' typos are caught before: ranklit.cli._dispatch)."""
        found = re.match(r"unrecognized arguments: (--[\w.]+)", message)
        keys = [key for key in self._option_string_actions if key.startswith("--")]
        close = difflib.get_close_matches(found.group(1), keys, n=1, cutoff=0.8) if found else []
        return f". Did you mean `{close[0]}`?" if close else ""


def as_user_error(error: BaseException) -> UserError:
    """A configured class's validation error (or Lightning's ``MisconfigurationException``) as a :class:`UserError`:
    the innermost :class:`UserError` of the chain (ranklit's message, not the error it explains), else the innermost
    such message, the one that names the value and the fix (jsonargparse wraps it in its own)."""
    links = list(chain(error))
    if mine := [e for e in links if isinstance(e, UserError)]:  # ranklit's own message, not the error it explains
        return mine[-1]
    innermost = [e for e in links if isinstance(e, (*BUILD_ERRORS, FileNotFoundError))][-1]
    return UserError(str(innermost))


def _yaml_problem(path: Path) -> str | None:
    """What is wrong with the YAML config ``path`` (``None``: nothing, or not a file: the parser says so)."""
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        return _binary_config(path)
    except OSError:
        return None
    try:
        tree = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        if mark is None:
            return f"{path}: not valid YAML ({str(error).splitlines()[0]})."
        line = text.splitlines()[mark.line] if mark.line < len(text.splitlines()) else ""
        hint = "YAML indents with spaces, not tabs" if "\t" in line else "fix the YAML syntax there"
        return f"{path}, line {mark.line + 1}, column {mark.column + 1}: {getattr(error, 'problem', error)}; {hint}."
    if tree is None:
        return f"{path} is empty: a config is a YAML mapping (`ranklit configs` lists the shipped ones to start from)."
    if not isinstance(tree, dict):
        return f"{path} holds a {type(tree).__name__}, not a mapping of keys (trainer:, model:, data:, ...)."
    return None


_CHECKPOINT_STARTS = (b"PK\x03\x04", b"\x80")  # torch.save's zip file, an older pickle-only checkpoint


def _binary_config(path: Path) -> str:
    """The line for a ``--config`` that is not text: a checkpoint (``ranklit test --config last.ckpt``) is named as
    one, with the command line that gives it as ``--ckpt_path``."""
    with path.open("rb") as handle:
        start = handle.read(4)
    if not start.startswith(_CHECKPOINT_STARTS):
        return f"{path} is not a text file: a config is a YAML file (`ranklit configs` lists the shipped ones)."
    return (f"{path} is a checkpoint, not a config: give it as `--ckpt_path {path}`, with the config of the run that "
            f"wrote it as `--config` ({_run_config(str(path))}).")


def _run_config(ckpt: str) -> str:
    """The ``config.yaml`` of the run that wrote the checkpoint ``ckpt`` (``<run>/checkpoints/<ckpt>``), or a
    placeholder when there is none."""
    saved = Path(ckpt).resolve().parent.parent / "config.yaml"
    return str(saved) if saved.is_file() else "<run directory>/config.yaml"


def _value(args: list[str], option: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == option and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(f"{option}="):
            return arg.split("=", 1)[1]
    return None


def check_command_line(args: list[str]) -> None:
    """Refuse, before parsing, a run command without a config and a config file that is not a YAML mapping."""
    configs = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("--config", "-c")]
    configs += [a.split("=", 1)[1] for a in args if a.startswith("--config=")]
    for config in configs:
        if problem := _yaml_problem(Path(config)):
            raise UserError(problem)
    if not args or args[0] not in _RUNS or configs or {"-h", "--help"} & set(args):
        return
    if any(a.split("=", 1)[0].endswith(".help") for a in args):
        return  # `--model.loss.help SupAPLoss`: a class's options, no run
    if any(a.startswith(("--model.net", "--model=", "--print_config")) for a in args):
        return  # a config given key by key, or printed
    raise missing_config(args[0], _value(args, "--ckpt_path"))


def missing_config(command: str, ckpt: str | None) -> UserError:
    """The error of ``ranklit <command>`` without ``--config``; with a checkpoint, it names the ``config.yaml`` of
    the run that wrote it (``<run>/checkpoints/<ckpt>`` → ``<run>/config.yaml``) when there is one."""
    hint = "`ranklit configs` lists the shipped configs, e.g. `ranklit fit --config quickstart.yaml`"
    if ckpt is not None:
        hint = (f"give the config of the run that wrote it: `ranklit {command} --config {_run_config(ckpt)} "
                f"--ckpt_path {ckpt}`")
    return UserError(f"`ranklit {command}` needs a config (`--config FILE`): {hint}.")


@contextmanager
def user_errors() -> Iterator[None]:
    """Print an error whose fix is the user's (a :class:`UserError`, a missing file, a permission, a refused
    checkpoint: :func:`ranklit.cli._errors._causes.user_message`; from a loader worker too) as ``error: ...`` and exit
    with code 2; re-raise anything else (Ctrl-C: :func:`ranklit.cli.main`)."""
    try:
        yield
    except Exception as error:
        message = user_message(error)
        if message is None or os.environ.get("RANKLIT_TRACEBACK"):
            raise
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(2) from None
