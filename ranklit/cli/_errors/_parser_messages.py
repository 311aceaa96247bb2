"""jsonargparse's parse errors that hide their useful part, as one line that says it (:func:`parser_message`).

**A ranklit class named by a path it no longer has.** jsonargparse answers an unimportable ``class_path`` with a
dump of the union it tried (about 14 lines: the subtypes, what a class path may be, the given value), where the one
useful line is buried. :func:`moved_class_message` finds such a path in the parser's message and, when the table of
moved names says where it went (``ranklit/_moved.py``, which the packages' own errors read too) or a public package
of ranklit exports a class of that name (its ``__all__``: a path with the wrong package), replaces the message by one
line naming the key, the old path and the new one.

**An option of another command.** A run's saved ``config.yaml`` holds the options of the command that ran it:
``verbose`` (``ranklit test``/``validate``), ``return_predictions`` (``predict``). Given to another command, the
parser says only "Option 'verbose' is not accepted"; :func:`other_command_message` says which commands take it and
that the config was saved by one of them.
"""

from __future__ import annotations

import importlib
import re

from ranklit._moved import MOVED

__all__ = ["PUBLIC_PACKAGES", "current_path", "moved_class_message", "other_command_message", "parser_message"]

PUBLIC_PACKAGES = (
    "ranklit.callbacks", "ranklit.data", "ranklit.losses", "ranklit.metrics", "ranklit.models", "ranklit.training",
    "ranklit.landmarks", "ranklit.index", "ranklit.deploy", "ranklit.viz",
)
_CLASS_PATH = re.compile(r"Problem with given class_path '(ranklit\.[\w.]+)':\s*\n\s*([^\n]+)")
_KEY = re.compile(r'^Parser key "([^"]+)"')
# jsonargparse 4.53: "Subcommand 'predict' does not accept option 'verbose'" from the command line's parse, "Option
# 'verbose' is not accepted" from the subcommand's own parser (`--print_config`); tests/cli/test_newcomer.py runs both
_NOT_ACCEPTED = re.compile(r"^(?:Option '(?P<option>\w+)' is not accepted|Subcommand '\w+' does not accept option "
                           r"'(?P<subkey>\w+)')$")
_COMMAND_OPTIONS = {"verbose": ("test", "validate"), "return_predictions": ("predict",)}  # LightningCLI's per-command


def parser_message(message: str) -> str:
    """``message`` made one useful line where this module knows how (module docstring), else unchanged."""
    return moved_class_message(message) or other_command_message(message) or message


def other_command_message(message: str) -> str | None:
    """One line for the parser's refusal of an option ``X`` (either wording: ``_NOT_ACCEPTED``) when ``X`` is an
    option of other ``ranklit`` commands.

    >>> other_command_message("Subcommand 'predict' does not accept option 'verbose'")  # doctest: +ELLIPSIS
    "Subcommand 'predict' does not accept option 'verbose': it is an option of `ranklit test` and ..."
    """
    found = _NOT_ACCEPTED.match(message.strip())
    name = found and (found.group("option") or found.group("subkey"))
    if not name or name not in _COMMAND_OPTIONS:
        return None
    commands = " and ".join(f"`ranklit {command}`" for command in _COMMAND_OPTIONS[name])
    return (
        f"{message.strip()}: it is an option of {commands} only, which save it in their run's config.yaml; to use "
        f"such a config with this command, delete its `{name}:` line (or give the training run's config.yaml)."
    )


def current_path(name: str) -> str | None:
    """``package.name`` for the first public package of :data:`PUBLIC_PACKAGES` that exports ``name``.

    >>> current_path("RankingGridLogger"), current_path("NoSuchThing")
    ('ranklit.callbacks.RankingGridLogger', None)
    """
    for package in PUBLIC_PACKAGES:
        try:
            module = importlib.import_module(package)
        except ImportError:  # a package of another version of the layout
            continue
        if name in getattr(module, "__all__", ()):
            return f"{package}.{name}"
    return None


def moved_class_message(message: str) -> str | None:
    """One line for a parser ``message`` about an unimportable ranklit ``class_path`` whose class lives elsewhere
    now, else ``None``.

    Example (a path with the wrong package; a moved one: tests/cli/test_misleading_messages.py):
        >>> moved_class_message('Parser key "data.batch_sampler":\\n  Errors:\\n    - Problem with given class_path '
        ...                     "'ranklit.models.PKSampler':\\n        module 'ranklit.models' has no "
        ...                     "attribute 'PKSampler'\\n    - Not a valid subclass")  # doctest: +ELLIPSIS
        "`data.batch_sampler`: class_path 'ranklit.models.PKSampler' no longer exists (module ...: it is now ..."
    """
    found = _CLASS_PATH.search(message)
    if found is None:
        return None
    old, reason = found.group(1), found.group(2).strip()
    key = _KEY.match(message)
    where = f"`{key.group(1)}`: " if key else ""
    if old in MOVED:  # a move the package table declares (ranklit/_moved.py)
        return f"{where}class_path '{old}' has moved: it is '{MOVED[old]}' now; write that in the config."
    new = current_path(old.rsplit(".", 1)[-1])
    if new is None or new == old:
        return None
    return f"{where}class_path '{old}' no longer exists ({reason}): it is now '{new}'; write that in the config."
