"""The one line the ``ranklit`` command prints for an exception whose fix is the user's (``None``: a bug, traceback).

:func:`user_message` looks through the exception's chain (``__cause__`` / ``__context__``) for:

- a :class:`ranklit.errors.UserError` or a ``FileNotFoundError``: its message;
- a ``PermissionError`` or a read-only file system (``EROFS``): the path, and where ranklit writes;
- a ``pickle.UnpicklingError`` (``torch.load`` refusing a checkpoint that names code to run): a refusal line;
- a failure of ``torch.compile``'s code generation (``model.compile``; inductor's ``InductorError`` or dynamo's
  ``BackendCompilerFailed``, e.g. no working C++ compiler on the CPU): its first line and the ways out, not the
  hundreds of lines of trace and generated code.

An exception raised in a ``DataLoader`` worker reaches the main process re-raised with the same type and a message
``Caught <Type> in DataLoader worker process <n>.\\nOriginal Traceback (most recent call last): ...`` (PyTorch's
``ExceptionWrapper``): :func:`worker_message` takes the original message back out of that traceback, so a bad image
met by a worker is the same line as one met in the main process.
"""

from __future__ import annotations

import errno
import pickle
import re
from collections.abc import Iterator

from ranklit.errors import UserError

__all__ = ["chain", "user_message", "worker_message"]

_COMPILE_FAILURES = ("InductorError", "BackendCompilerFailed")  # torch._inductor.exc, torch._dynamo.exc
_WORKER = re.compile(r"Caught (\w+) in DataLoader worker process \d+\.\nOriginal Traceback")


def chain(error: BaseException) -> Iterator[BaseException]:
    """``error``, then its causes and contexts, each once."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def worker_message(text: str) -> str:
    """The original message of an exception re-raised from a ``DataLoader`` worker (``text`` itself otherwise).

    Example:
        >>> worker_message("Caught UserError in DataLoader worker process 0.\\nOriginal Traceback (most recent "
        ...                "call last):\\n  File \\"x.py\\", line 1\\nranklit.errors.UserError: a.jpg is truncated.\\n")
        'a.jpg is truncated.'
    """
    found = _WORKER.match(text)
    if found is None:
        return text
    finals = list(re.finditer(rf"^(?:[\w.]+\.)?{found.group(1)}: ", text, flags=re.M))
    return text[finals[-1].end() :].strip() if finals else text


def user_message(error: BaseException) -> str | None:
    """The line to print for ``error`` when its fix is the user's (module docstring), else ``None``."""
    for link in chain(error):
        if isinstance(link, (UserError, FileNotFoundError)):
            return worker_message(str(link))
        if isinstance(link, PermissionError) or (isinstance(link, OSError) and link.errno == errno.EROFS):
            where = link.filename if link.filename is not None else worker_message(str(link))
            return (
                f"{where}: {link.strerror or 'permission denied'}. ranklit reads the data and configs and writes the "
                "runs (`trainer.logger.init_args.save_dir`, relative to the working directory) and predictions "
                "(`--predictions_path`): give paths this user may read and write, or run from a writable folder."
            )
        if isinstance(link, pickle.UnpicklingError):
            lines = [line.strip().rstrip(".") for line in str(link).splitlines()]
            detail = next((line for line in lines if "GLOBAL" in line or "global" in line), "")
            return (
                f"refused to load a checkpoint that names code to run{f' ({detail})' if detail else ''}: unpickling "
                "it could execute that code. Use a checkpoint written by ranklit, from a source you trust."
            )
        if type(link).__name__ in _COMPILE_FAILURES and type(link).__module__.startswith("torch."):
            first = next((line.strip() for line in str(link).splitlines() if line.strip()), type(link).__name__)
            return (
                f"torch.compile (`model.compile`) failed at the first batch: {first[:300]}. Inductor, its default "
                "backend, needs a working C++ compiler (g++) on the CPU and Triton on a GPU: install it, compile "
                "with a backend that generates no code (`--model.compile '{backend: aot_eager}'`), or set "
                "`--model.compile false` (RANKLIT_TRACEBACK=1 shows the trace)."
            )
    return None
