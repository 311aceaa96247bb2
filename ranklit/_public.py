"""Registered classes report their public module: a loss defined in ``ranklit/losses/_smooth_rank.py`` is
``ranklit.losses.SupAPLoss`` to pickle, ``repr``, jsonargparse's ``class_path`` and tracebacks' readers, so that
nothing a user saves (a pickled module, a checkpoint's hyper-parameters, a printed config) names a private module
that may move.

Example:
    >>> class Toy:
    ...     pass
    >>> Toy.__module__ = "ranklit.losses._toy"
    >>> publish(Toy, "ranklit.losses").__module__, defined_in(Toy)
    ('ranklit.losses', 'ranklit.losses._toy')
"""

from __future__ import annotations

from typing import TypeVar

__all__ = ["defined_in", "publish"]

T = TypeVar("T", bound=type)


def publish(cls: T, package: str) -> T:
    """``cls`` with ``__module__`` set to ``package`` when it is defined inside that package (a user's class defined
    elsewhere keeps its own module); the defining module stays readable through :func:`defined_in`."""
    if cls.__module__.startswith(package + "."):
        cls._defined_in = cls.__module__  # type: ignore[attr-defined]
        cls.__module__ = package
    return cls


def defined_in(cls: type) -> str:
    """The module that defined ``cls`` (not inherited: a subclass defined elsewhere has its own)."""
    return str(vars(cls).get("_defined_in", cls.__module__))
