"""A config that names a ranklit class by a path it no longer has: one line with the class's current path.

jsonargparse answers an unimportable ``class_path`` with a dump of the union it tried (about 14 lines: the subtypes,
what a class path may be, the given value), where the one useful line, "module 'ranklit.models' has no attribute
'RankingGridLogger'", is buried and the class's new home is not said. :func:`moved_class_message` finds such a path
in the parser's message and, when a public package of ranklit exports a class of that name (its ``__all__``),
replaces the message by one line naming the key, the old path and the new one.
"""

from __future__ import annotations

import importlib
import re

__all__ = ["PUBLIC_PACKAGES", "current_path", "moved_class_message"]

PUBLIC_PACKAGES = ("ranklit.callbacks", "ranklit.data", "ranklit.losses", "ranklit.metrics", "ranklit.models",
                   "ranklit.training", "ranklit.landmarks", "ranklit.index", "ranklit.deploy", "ranklit.viz")  # fmt: skip
_CLASS_PATH = re.compile(r"Problem with given class_path '(ranklit\.[\w.]+)':\s*\n\s*([^\n]+)")
_KEY = re.compile(r'^Parser key "([^"]+)"')


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

    Example:
        >>> moved_class_message('Parser key "trainer.callbacks":\\n  Errors:\\n    - Problem with given class_path '
        ...                     "'ranklit.models.RankingGridLogger':\\n        module 'ranklit.models' has no attribute "
        ...                     "'RankingGridLogger'\\n    - Not a valid subclass")  # doctest: +ELLIPSIS
        "`trainer.callbacks`: class_path 'ranklit.models.RankingGridLogger' no longer exists (module ... it is now ..."
    """
    found = _CLASS_PATH.search(message)
    if found is None:
        return None
    old, reason = found.group(1), found.group(2).strip()
    new = current_path(old.rsplit(".", 1)[-1])
    if new is None or new == old:
        return None
    key = _KEY.match(message)
    where = f"`{key.group(1)}`: " if key else ""
    return f"{where}class_path '{old}' no longer exists ({reason}): it is now '{new}'; write that in the config."
