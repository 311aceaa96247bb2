"""Losses and metrics leave autocast: they compute in float32 (float64 stays) whatever precision the network runs in.

Under ``torch.autocast`` (Lightning's ``--trainer.precision bf16-mixed`` / ``16-mixed``, or a user's own
``with torch.autocast(...)``) a matrix product runs in bfloat16 or float16: the cosine scores of a loss or a metric
would then carry about 3 significant digits (bfloat16), too few for a sigmoid temperature of 0.01 or for the ties of
an exact metric. :func:`full_precision` wraps the entry points of the losses (``EmbeddingLoss.forward``) and of the
metrics (``retrieval_metric_tensors``) so that autocast is off inside them on every device type; the inputs are
brought to the computation dtype by :func:`ranklit.functional.inputs.prepare_inputs` (float32, float64 stays),
inside the autograd graph, so gradients flow back to the network in its own dtype.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import ExitStack
from typing import ParamSpec, TypeVar

import torch

__all__ = ["full_precision", "autocast_off"]

_DEVICE_TYPES = ("cpu", "cuda")  # the device types whose autocast ranklit's users turn on
_P = ParamSpec("_P")
_R = TypeVar("_R")


def autocast_off() -> ExitStack:
    """A context in which autocast is off on every device type where it is on (nothing to do elsewhere).

    Cost: a few microseconds (one flag query per device type).

    Example:
        >>> with torch.autocast("cpu", dtype=torch.bfloat16), autocast_off():
        ...     (torch.ones(2, 2) @ torch.ones(2, 2)).dtype
        torch.float32
    """
    stack = ExitStack()
    for device_type in _DEVICE_TYPES:
        if torch.is_autocast_enabled(device_type):
            stack.enter_context(torch.autocast(device_type, enabled=False))
    return stack


def full_precision(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Decorate ``fn`` so it runs with autocast off (:func:`autocast_off`).

    Example:
        >>> @full_precision
        ... def product(a, b):
        ...     return a @ b
        >>> with torch.autocast("cpu", dtype=torch.bfloat16):
        ...     product(torch.ones(2, 2), torch.ones(2, 2)).dtype
        torch.float32
    """

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with autocast_off():
            return fn(*args, **kwargs)

    return wrapper
