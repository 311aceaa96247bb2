"""Argument checks shared by every layer (a module of its own that imports nothing, so ``functional``, ``data``,
``losses``, ``models``, ``training`` and ``viz`` may all use it without breaking the dependency arrows).

>>> positive_int(3, "k")
3
>>> positive_int(0, "k", " (images per class)")
Traceback (most recent call last):
    ...
ValueError: `k` must be a positive integer (images per class), got 0.
"""

from __future__ import annotations

__all__ = ["positive_int"]


def positive_int(value: object, name: str, what: str = "") -> int:
    """``value`` if it is an ``int`` of at least 1 (``True``/``False`` are refused), else a ``ValueError`` naming
    ``name``, followed by ``what`` (a unit or a hint, e.g. ``" number of pixels"``), and the value given."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer{what}, got {value!r}.")
    return value
