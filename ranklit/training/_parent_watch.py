"""Workers that stop when their launcher dies: a ``torchrun`` worker watches its parent, the agent.

``torchrun``'s agent starts the workers and stops them on a signal it receives; a ``kill -9`` of the agent (an
out-of-memory killer, a scheduler killing the wrong process) gives it no chance, and its workers, left without a
parent, would train to the end of the run unseen. :func:`watch_parent` starts, in a worker (``TORCHELASTIC_RUN_ID``
set), a daemon thread that polls :func:`os.getppid` every second: once the parent has changed (the worker was
re-parented), it sends its own process ``SIGTERM``, which is one of ranklit's stops (:mod:`ranklit.training.stops`):
every worker notices within a second, they agree to stop after the same batch, save ``interrupted.ckpt`` and exit
with 143, and ``--resume true`` continues the run. Polling rather than ``prctl(PR_SET_PDEATHSIG)``: that Linux call
fires when the parent *thread* that started the worker ends, not the agent process, and exists on Linux only.
Lightning's own launcher needs no watch: its rank 0 is the parent and a process of the run, so its death breaks the
others' collectives.

Example:
    >>> watch_parent({}) is None  # not a torchrun worker: nothing to watch
    True
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Mapping

__all__ = ["watch_parent"]

POLL_SECONDS = 1.0


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(POLL_SECONDS)
    os.kill(os.getpid(), signal.SIGTERM)


def watch_parent(environ: Mapping[str, str] = os.environ) -> threading.Thread | None:
    """Start the watch of a ``torchrun`` worker's parent (module docstring); the thread, ``None`` outside a worker."""
    if "TORCHELASTIC_RUN_ID" not in environ:
        return None
    watcher = threading.Thread(target=_watch, args=(os.getppid(),), name="ranklit-parent-watch", daemon=True)
    watcher.start()
    return watcher
