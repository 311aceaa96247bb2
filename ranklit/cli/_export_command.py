"""``ranklit export --config C --ckpt_path K --format onnx|torchscript --output PATH``: the network, out of its run.

Writes the network as ``RetrievalModule.net(x)`` computes it (:func:`ranklit.deploy.export_model`) and its JSON card
beside it (``PATH.json``: input size, resize/crop, mean/std, embedding size, L2 normalisation, versions, the config).
"""

from __future__ import annotations

import argparse
import difflib
import errno
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the commands import ranklit.deploy (torch, Lightning) after parsing: `--help` is immediate
    from ranklit.deploy import LoadedModel

__all__ = ["CommandParser", "add_model_options", "arguments", "main", "model_from_options"]


class CommandParser(argparse.ArgumentParser):
    """argparse with a one-line usage in its errors (the whole one is in ``--help``), taking no abbreviated option:
    argparse's prefix matching took ``ranklit index --image X`` for ``--images X`` (as the run commands' parser,
    :class:`ranklit.cli._errors._surface.ShortUsageParser`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        """argparse's parse, with an unknown ``--option`` named first (argparse names a missing required option
        before it: ``--image X`` was "the following arguments are required: --images"), and the closest option."""
        for arg in (sys.argv[1:] if args is None else list(args)):
            if arg == "--":
                break
            option = arg.split("=", 1)[0]
            if option.startswith("--") and option not in self._option_string_actions:
                close = difflib.get_close_matches(option, list(self._option_string_actions), n=1, cutoff=0.8)
                self.error(f"unrecognized arguments: {option}" + (f". Did you mean `{close[0]}`?" if close else ""))
        return super().parse_args(args, namespace)

    def format_usage(self) -> str:
        return f"usage: {self.prog} [options] (all options: {self.prog} --help)\n"


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """``--config`` and ``--ckpt_path``: the run's config and its checkpoint."""
    parser.add_argument("--config", default=None, help="the config of the run (its config.yaml)")
    parser.add_argument("--ckpt_path", required=True, help="the checkpoint whose network is used")


def model_from_options(options: argparse.Namespace, command: str) -> LoadedModel:
    """The network of ``--config`` with the weights of ``--ckpt_path``; no config is a user error naming the run's."""
    from ranklit.cli._errors._surface import missing_config
    from ranklit.deploy import load_model

    if options.config is None:
        raise missing_config(command, options.ckpt_path)
    return load_model(options.config, options.ckpt_path)


def _check_writable(output: Path) -> None:
    """Refuse, before the network is loaded, an ``--output`` that names a folder or lies in one this user cannot
    write (TorchScript's writer would say so in a C++ traceback)."""
    from ranklit.errors import UserError

    if output.is_dir():
        example = output / "model.onnx"
        raise UserError(f"`--output` {output} is a folder: give the model file to write (e.g. {example}).")
    folder = output.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as error:
        if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):  # the error surface names the folder
            raise OSError(error.errno, error.strerror, str(folder)) from None
        raise UserError(f"cannot write into {folder}: {error.strerror}; give `--output` a file path in a writable "
                        "folder.") from None


def arguments() -> argparse.ArgumentParser:
    """The options of ``ranklit export``."""
    parser = CommandParser(prog="ranklit export", description=__doc__.splitlines()[0].replace("``", ""))
    add_model_options(parser)
    parser.add_argument("--format", required=True, choices=["onnx", "torchscript"], help="the file format")
    parser.add_argument("--output", required=True, type=Path, help="the model file to write (e.g. model.onnx)")
    return parser


def main(args: list[str]) -> None:
    """``ranklit export ...`` (``args`` after ``export``)."""
    options = arguments().parse_args(args)
    _check_writable(options.output)
    from ranklit.deploy import card_path, export_model

    card = export_model(model_from_options(options, "export"), options.output, options.format)
    output = card["output"]
    sys.stdout.write(
        f"wrote {options.output} ({options.format}, input [B, 3, {card['input']['height']}, {card['input']['width']}], "
        f"output [B, {output['embedding_dim']}]{', L2-normalised' if output['l2_normalised'] else ''}) and its card "
        f"{card_path(options.output)}\n"
    )
