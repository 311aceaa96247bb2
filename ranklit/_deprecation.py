"""The one way ranklit deprecates a public name once a release has published it: a ``FutureWarning`` (shown by
default, as torchmetrics does, unlike ``DeprecationWarning``) naming the new spelling and the release that removes the
old one. A moved name stays where it was as a small shim that calls :func:`deprecated_alias`; a moved module stays as
a file that calls :func:`moved_module` (the public modules that 0.2.0 moved into the domain sub-packages of
``ranklit.functional`` and ``ranklit.data``); nothing else deprecates.

Example:
    >>> import warnings
    >>> def new_function():
    ...     return 42
    >>> old_function = deprecated_alias(new_function, "ranklit.old_function", "ranklit.new_function", "0.3.0")
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     old_function()
    42
    >>> caught[0].category.__name__, str(caught[0].message)
    ('FutureWarning', '`ranklit.old_function` is deprecated: use `ranklit.new_function` (removed in ranklit 0.3.0).')
"""

from __future__ import annotations

import functools
import importlib
import sys
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["deprecated_alias", "moved_module", "warn_deprecated"]

F = TypeVar("F", bound=Callable[..., Any])


def deprecated_alias(target: F, old: str, new: str, removed_in: str) -> F:
    """``target`` under its old name ``old``: each call warns (``FutureWarning``, attributed to the caller's line) that
    ``new`` replaces it and that ``removed_in`` removes it. For a class, subclass it in the shim instead and call
    :func:`warn_deprecated` from ``__init__``."""

    @functools.wraps(target)
    def alias(*args: Any, **kwargs: Any) -> Any:
        warn_deprecated(old, new, removed_in, stacklevel=3)
        return target(*args, **kwargs)

    return alias  # type: ignore[return-value]


def warn_deprecated(old: str, new: str, removed_in: str, *, stacklevel: int = 2) -> None:
    """The deprecation warning itself: ``FutureWarning`` naming ``old``, ``new`` and the release ``removed_in``."""
    message = f"`{old}` is deprecated: use `{new}` (removed in ranklit {removed_in})."
    warnings.warn(message, FutureWarning, stacklevel=stacklevel)


def moved_module(old: str, new: str, removed_in: str) -> None:
    """Called by the shim file left at a moved public module's old path ``old``: importing it warns once (the
    ``FutureWarning`` of :func:`warn_deprecated`, attributed to the importing line) and gives the module ``new`` itself,
    so that ``old.name`` is ``new.name`` (same objects, same pickles).

    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     moved_module("ranklit.old_home", "ranklit.functional.floating_point", "0.3.0")
    >>> sys.modules["ranklit.old_home"] is sys.modules["ranklit.functional.floating_point"]
    True
    >>> print(caught[0].message)
    `ranklit.old_home` is deprecated: use `ranklit.functional.floating_point` (removed in ranklit 0.3.0).
    >>> del sys.modules["ranklit.old_home"]
    """
    module = importlib.import_module(new)
    # 1 warn_deprecated, 2 here, 3 the shim's body, 4 the import statement (the import system's frames are skipped)
    warn_deprecated(old, new, removed_in, stacklevel=4)
    sys.modules[old] = module
