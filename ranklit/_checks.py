"""Argument checks shared by every layer: one module, one argument order (``name`` first, then the value).

It imports nothing but :mod:`ranklit.errors`, so ``functional``, ``losses``, ``metrics``, ``data``, ``models``,
``training``, ``callbacks`` and ``viz`` may all use it without breaking the dependency arrows. Each check returns the
value (normalised: a number becomes a ``float``) or raises :class:`ranklit.errors.UserError` (a ``ValueError``)
naming the argument, what it must be and what was given; :func:`check_flag` raises ``TypeError``.

>>> check_positive_int("k", 3)
3
>>> check_positive_int("k", 0, " (images per class)")
Traceback (most recent call last):
    ...
ranklit.errors.UserError: `k` must be a positive integer (images per class), got 0.
"""

from __future__ import annotations

import math

from ranklit.errors import UserError

__all__ = [
    "check_positive",
    "check_in_range",
    "check_positive_int",
    "check_int_at_least",
    "check_chunk_size",
    "check_flag",
    "check_choice",
]


def check_positive(name: str, value: float) -> float:
    """``float(value)`` if it is a finite number ``> 0``.

    >>> check_positive("tau", 0.01)
    0.01
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise UserError(f"`{name}` must be a finite number > 0, got {value!r}.")
    return float(value)


def check_in_range(name: str, value: float, low: float, high: float) -> float:
    """``float(value)`` if it is a finite number with ``low <= value <= high`` (``high`` may be ``math.inf``).

    >>> check_in_range("lam", 0.5, 0.0, 1.0)
    0.5
    """
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or not low <= value <= high:
        raise UserError(f"`{name}` must be a number in [{low}, {high}], got {value!r}.")
    return float(value)


def check_positive_int(name: str, value: object, what: str = "") -> int:
    """``value`` if it is an ``int`` of at least 1 (``True``/``False`` are refused); ``what`` follows the
    requirement in the message (a unit or a hint, e.g. ``" (images per class)"``)."""
    return check_int_at_least(name, value, 1, what)


def check_int_at_least(name: str, value: object, minimum: int, what: str = "") -> int:
    """``value`` if it is an ``int >= minimum`` (``True``/``False`` are refused).

    >>> check_int_at_least("num_bins", 10, 2)
    10
    >>> check_int_at_least("num_bins", 1, 2)
    Traceback (most recent call last):
    ...
    ranklit.errors.UserError: `num_bins` must be an integer >= 2, got 1.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        requirement = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise UserError(f"`{name}` must be {requirement}{what}, got {value!r}.")
    return value


def check_chunk_size(name: str, value: int | None) -> int | None:
    """``value`` if it is ``None`` (automatic) or a positive int (``True`` is refused).

    >>> check_chunk_size("chunk_size", 64), check_chunk_size("chunk_size", None)
    (64, None)
    >>> check_chunk_size("chunk_size", True)
    Traceback (most recent call last):
    ...
    ranklit.errors.UserError: `chunk_size` must be a positive int (queries per chunk) or None (automatic), got True.
    """
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise UserError(f"`{name}` must be a positive int (queries per chunk) or None (automatic), got {value!r}.")
    return value


def check_flag(name: str, value: bool) -> bool:
    """``value`` if it is a bool (``normalize``, ``include_self``, ...), else ``TypeError``.

    >>> check_flag("normalize", True)
    True
    """
    if not isinstance(value, bool):
        raise TypeError(f"`{name}` must be True or False, got {value!r}.")
    return value


def check_choice(name: str, value: str, choices: tuple[str, ...], meaning: str) -> str:
    """``value`` if it is one of ``choices``; ``meaning`` says what the choices are.

    >>> check_choice("average", "class", ("query", "class"), "the mean over queries or classes")
    'class'
    """
    if value not in choices:
        raise UserError(f"`{name}` must be one of {choices} ({meaning}), got {value!r}.")
    return value
