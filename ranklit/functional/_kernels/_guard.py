"""Kernels that cannot break a run: a first-use self-check, one visible fallback, the launch on the tensor's device.

Every Triton kernel family of ranklit (the smooth-rank sums of the losses, the metrics' counting kernel) runs through
this guard, keyed by ``(kernel, device, dtype)``:

1. **First use** (:func:`kernel_usable`): before a kernel's first real call in the process, its *probe* runs: the
   kernel on a small problem built on its edge cases (tile edges, a query without positives, ties) against the torch
   path, values and gradients at the tolerances the docs state (the metrics' counts exactly). It passes: the kernel
   runs for the rest of the process. It fails (a compile error, a launch error, a mismatch): :func:`kernel_failed`.
2. **Any later call** whose launch raises (a new shape compiles a new variant) goes to :func:`kernel_failed` too and
   the caller recomputes that call with the torch path.

:func:`kernel_failed` records the failure, so that the torch path runs for that key for the rest of the process, and
gives **one** :class:`KernelFallbackWarning` naming the kernel, the device, the Triton version and the error. Where
the user forced the kernels (the losses' ``engine="triton"``), it raises :class:`KernelError` instead.

What no guard can catch: an asynchronous CUDA fault (an illegal address) surfaces at the next synchronisation, after
the launch returned, and leaves the CUDA context unusable for torch as well; the probe synchronises, so a kernel that
faults on every call is caught at its first use.

The kernels also need Triton 3.4 or later (:func:`triton_version_problem`: older Triton lacks ``triton.knobs``, which
the kernels read), and launch inside ``torch.cuda.device(tensor.device)`` (:func:`kernel_device`): Triton launches on
the *current* device, which is not the tensor's for a tensor on ``cuda:1`` in a plain loop or a notebook.
"""

from __future__ import annotations

import contextlib
import re
import sys
import warnings
from collections.abc import Callable, Iterator

import torch

__all__ = [
    "MIN_TRITON",
    "KernelError",
    "KernelFallbackWarning",
    "KernelLaunchError",
    "kernel_device",
    "kernel_failed",
    "kernel_state",
    "kernel_usable",
    "last_failure",
    "reset_kernel_checks",
    "triton_version",
    "triton_version_problem",
]

MIN_TRITON = (3, 4)
"""The oldest Triton the kernels support (3.4: ``triton.knobs``; PyTorch 2.8 ships it)."""

_FAILED: dict[tuple[str, str, str], str] = {}  # key -> the warning given (the torch path runs)
_PASSED: set[tuple[str, str, str]] = set()


class KernelError(RuntimeError):
    """A forced kernel (``engine="triton"``) failed its self-check or a launch on this machine.

    >>> KernelError.__mro__[1].__name__
    'RuntimeError'
    """


class KernelLaunchError(RuntimeError):
    """A launch raised ``error`` (its ``__cause__``): the caller recomputes with the torch path."""


class KernelFallbackWarning(UserWarning):
    """A Triton kernel failed on this machine: the torch path computes it for the rest of the process.

    >>> KernelFallbackWarning.__mro__[1].__name__  # shown once, filterable as any warning
    'UserWarning'
    """


def triton_version() -> str:
    """The version of the imported Triton (``"not imported"`` before anything imported it)."""
    module = sys.modules.get("triton")
    return str(getattr(module, "__version__", "not imported"))


def triton_version_problem() -> str | None:
    """Why the installed Triton is too old for the kernels (it lacks ``triton.knobs``), or ``None``; call it where
    Triton imports."""
    import triton

    version = str(getattr(triton, "__version__", "0"))
    numbers = tuple(int(part) for part in re.findall(r"\d+", version)[:2])
    if numbers >= MIN_TRITON and hasattr(triton, "knobs"):
        return None
    oldest = ".".join(map(str, MIN_TRITON))
    return f"Triton {version} is older than {oldest}, the oldest the kernels support (PyTorch >= 2.8 ships it)"


@contextlib.contextmanager
def kernel_device(device: torch.device) -> Iterator[None]:
    """``device`` the current CUDA device inside (Triton launches on the current one); nothing for other devices.

    >>> with kernel_device(torch.device("cpu")):
    ...     pass
    """
    if device.type != "cuda":
        yield
        return
    with torch.cuda.device(device):
        yield


def _key(kernel: str, device: torch.device, dtype: torch.dtype) -> tuple[str, str, str]:
    return kernel, str(device), str(dtype).removeprefix("torch.")


def kernel_state(kernel: str, device: torch.device, dtype: torch.dtype) -> str:
    """``"unchecked"``, ``"passed"`` or ``"failed"``: where the guard stands for this key.

    >>> kernel_state("a kernel nobody ran", torch.device("cpu"), torch.float32)
    'unchecked'
    """
    key = _key(kernel, device, dtype)
    return "failed" if key in _FAILED else "passed" if key in _PASSED else "unchecked"


def last_failure(kernel: str, device: torch.device, dtype: torch.dtype) -> str:
    """The warning a failure of this key gave (``""``: none)."""
    return _FAILED.get(_key(kernel, device, dtype), "")


def kernel_usable(
    kernel: str, device: torch.device, dtype: torch.dtype, probe: Callable[[], None], *, forced: bool = False
) -> bool:
    """Whether ``kernel`` may run on ``device`` for ``dtype``: its ``probe`` runs on first use (raising on a
    mismatch); a probe that raises goes to :func:`kernel_failed` (``False``, or :class:`KernelError` if ``forced``)."""
    key = _key(kernel, device, dtype)
    if key in _FAILED:
        if forced:
            raise KernelError(_FAILED[key])
        return False
    if key not in _PASSED:
        try:
            with kernel_device(device):
                probe()
        except Exception as error:  # a compile error, a launch error, a mismatch: all mean "not on this machine"
            kernel_failed(kernel, device, dtype, error, forced=forced, during="its self-check")
            return False
        _PASSED.add(key)
    return True


def kernel_failed(
    kernel: str, device: torch.device, dtype: torch.dtype, error: BaseException, *, forced: bool = False,
    during: str = "a call",
) -> None:
    """Record that ``kernel`` failed (``error``) on ``device``: the torch path runs for this key from now on, with one
    :class:`KernelFallbackWarning`; ``forced``: :class:`KernelError` instead."""
    key = _key(kernel, device, dtype)
    if isinstance(error, KernelLaunchError) and error.__cause__ is not None:
        error = error.__cause__  # what the launch raised
    message = (
        f"The Triton kernel {kernel} failed {during} on {_describe(device)} for {key[2]} inputs (Triton "
        f"{triton_version()}): {type(error).__name__}: {_summary(error)}. The torch path computes it for the rest "
        "of this process (the same results, slower). Please report it with the output of `ranklit check gpu`."
    )
    first = key not in _FAILED
    _FAILED[key] = message
    _PASSED.discard(key)
    if forced:
        raise KernelError(message.replace("The torch path computes", "engine='triton' forces the kernels; with "
                                          "engine='auto' the torch path would compute")) from error
    if first:
        warnings.warn(message, KernelFallbackWarning, stacklevel=4)


def reset_kernel_checks() -> None:
    """Forget every check and failure (tests, and ``ranklit check gpu`` before it checks)."""
    _FAILED.clear()
    _PASSED.clear()


def _describe(device: torch.device) -> str:
    if device.type != "cuda":
        return f"{device} (Triton's interpreter)"
    try:
        major, minor = torch.cuda.get_device_capability(device)
        return f"{device} ({torch.cuda.get_device_name(device)}, sm_{major}{minor})"
    except Exception:  # a device the driver cannot describe any more: its name alone
        return str(device)


def _summary(error: BaseException) -> str:
    """The first and last lines of the error (a Triton compile error puts its source first, its reason last)."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if not lines:
        return "(no message)"
    return (lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}")[:400]
