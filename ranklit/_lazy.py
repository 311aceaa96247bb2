"""The one way a ranklit package imports a name on first use (PEP 562): a package whose ``import`` must stay light
(no Lightning, Pillow or torchvision behind ``import ranklit.data``; a fast ``ranklit index --help``) lists what each
lazy name's module is, and :func:`lazy_exports` gives it the module-level ``__getattr__`` and ``__dir__``.

Example:
    >>> __getattr__, __dir__ = lazy_exports("ranklit.errors", {"UserError": "ranklit.errors"})
    >>> __getattr__("UserError").__name__
    'UserError'
    >>> __getattr__("Missing")
    Traceback (most recent call last):
    ...
    AttributeError: module 'ranklit.errors' has no attribute 'Missing'
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

from ranklit._moved import moved_attribute

__all__ = ["lazy_exports"]


def lazy_exports(package: str, modules: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``__getattr__(name)`` imports ``modules[name]`` (an absolute module
    name) on first use and keeps the value in the package's namespace, so the second use is a plain attribute;
    ``__dir__`` lists the package's names and the lazy ones. A name that moved elsewhere is an ``AttributeError``
    saying where (:mod:`ranklit._moved`)."""

    def __getattr__(name: str) -> Any:
        if name not in modules:
            raise moved_attribute(package, name)
        value = getattr(importlib.import_module(modules[name]), name)
        namespace = sys.modules.get(package)
        if namespace is not None:
            setattr(namespace, name, value)  # imported once
        return value

    def __dir__() -> list[str]:
        namespace = sys.modules.get(package)
        return sorted({*(vars(namespace) if namespace is not None else ()), *modules})

    return __getattr__, __dir__
