"""``model.compile``: ``torch.compile`` for the embedding network (and optionally the loss) of a ``RetrievalModule``.

``compile: true`` compiles with ``torch.compile``'s defaults (inductor); a mapping gives its keyword arguments
(``mode``, ``fullgraph``, ``dynamic``, ``backend``, ``options``, ``disable``), e.g. ``{mode: max-autotune}``.
The module is compiled in place (``nn.Module.compile``), so its ``state_dict`` keys, checkpoints and parameter groups
are those of the plain module. Compilation happens at the first batch (tens of seconds for a ResNet-50 on a GPU) and
again when a new input shape arrives (the last, smaller batch of an evaluation set; ``dynamic`` governs whether that
second graph is shape-generic).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import nn

from ranklit.errors import UserError

__all__ = ["COMPILE_KEYS", "compile_options", "compile_in_place"]

COMPILE_KEYS = ("fullgraph", "dynamic", "backend", "mode", "options", "disable")


def compile_options(value: bool | Mapping[str, Any], name: str = "compile") -> dict[str, Any] | None:
    """The keyword arguments of ``torch.compile`` that ``value`` asks for, or ``None`` (no compilation).

    Raises:
        TypeError: ``value`` is neither a bool nor a mapping.
        ValueError: a key that ``torch.compile`` does not take.

    Example:
        >>> compile_options(False), compile_options(True), compile_options({"mode": "reduce-overhead"})
        (None, {}, {'mode': 'reduce-overhead'})
    """
    if isinstance(value, bool):
        return {} if value else None
    if not isinstance(value, Mapping):
        raise TypeError(
            f"`model.{name}` must be true, false or a mapping of torch.compile options (e.g. {{mode: max-autotune}}), "
            f"got {value!r}."
        )
    unknown = sorted(set(value) - set(COMPILE_KEYS))
    if unknown:
        raise ValueError(
            f"`model.{name}` has key(s) {unknown} that torch.compile does not take; the keys are {list(COMPILE_KEYS)}."
        )
    return dict(value)


def compile_in_place(module: nn.Module, options: dict[str, Any] | None) -> None:
    """Compile ``module`` in place with ``options`` (nothing for ``None``); the compilation itself waits for the first
    call."""
    if options is None:
        return
    try:
        module.compile(**options)  # checks the options now (an unknown mode, backend), compiles at the first call
    except (RuntimeError, ValueError, TypeError) as error:
        raise UserError(f"`model.compile`: torch.compile refused the options {options}: {error}") from error
