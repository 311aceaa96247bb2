"""Boolean options of the argparse commands (``ranklit index``, ``ranklit search``) spelled as the run commands spell
theirs: ``--exclude_self false``, ``--json true``, or the bare ``--json`` for true.

argparse's ``store_true`` takes no value (``--json false`` is "unrecognized arguments: false") and
``BooleanOptionalAction`` only ``--no-KEY``, while jsonargparse, behind ``ranklit fit``, reads ``--KEY true|false``:
a newcomer types the second spelling everywhere. :func:`add_boolean` gives one option all three.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(allow_abbrev=False)
    >>> add_boolean(parser, "--exclude_self", default=True, help="leave the query out")
    >>> [parser.parse_args(args).exclude_self for args in ([], ["--exclude_self", "false"], ["--exclude_self"],
    ...                                                    ["--no-exclude_self"])]
    [True, False, True, False]
"""

from __future__ import annotations

import argparse

__all__ = ["add_boolean", "boolean"]

_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


def boolean(text: str) -> bool:
    """``True`` / ``False`` for the words jsonargparse reads as booleans (any case); argparse's error otherwise."""
    word = text.strip().lower()
    if word in _TRUE or word in _FALSE:
        return word in _TRUE
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def add_boolean(parser: argparse.ArgumentParser, name: str, *, default: bool, help: str) -> None:
    """``name`` (``--KEY``) as ``--KEY true|false`` (the bare ``--KEY``: true) and ``--no-KEY`` (false)."""
    key = name.removeprefix("--")
    parser.add_argument(name, type=boolean, nargs="?", const=True, default=default, metavar="true|false",
                        help=f"{help} (default: {str(default).lower()})")
    parser.add_argument(f"--no-{key}", dest=key, action="store_false", help=f"the same as `{name} false`")
