"""Ctrl-C anywhere in a ``ranklit`` command, its start-up included: one line and exit 130, whatever it broke.

A Ctrl-C raises :class:`KeyboardInterrupt` where Python next checks for signals, and that can be inside an extension
module's initialisation, which does not always let it through: seen in CI, a Ctrl-C during the import of scipy's HiGHS
wrapper (pybind11, imported by torchmetrics) left it half-registered, and the import chain ended in
``ImportError: generic_type: type "ObjSense" is already registered!``, a 60-line traceback and exit 1. So the
handler records that the key was pressed, and any exception raised after that is reported as the interruption it
is. ``RANKLIT_TRACEBACK=1`` shows the traceback instead.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from types import FrameType

INTERRUPTED = "interrupted (Ctrl-C)"


def run_interruptible(command: Callable[[], None]) -> None:
    """Run ``command``; after a Ctrl-C, whatever it raises (bar :class:`SystemExit`) becomes one line and exit 130.

    A ``SIGINT`` that was ignored when ranklit started (a shell's background job, ``nohup``) stays ignored.

    >>> run_interruptible(lambda: print("ran"))
    ran
    """
    pressed: list[int] = []

    def record(signum: int, frame: FrameType | None) -> None:
        pressed.append(signum)
        signal.default_int_handler(signum, frame)

    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.default_int_handler:
        signal.signal(signal.SIGINT, record)
    try:
        command()
    except SystemExit:
        raise
    except BaseException as error:
        if not (pressed or isinstance(error, KeyboardInterrupt)) or os.environ.get("RANKLIT_TRACEBACK"):
            raise
        sys.stderr.write(f"{INTERRUPTED}\n")
        raise SystemExit(130) from None
    finally:
        if signal.getsignal(signal.SIGINT) is record:
            signal.signal(signal.SIGINT, previous)
