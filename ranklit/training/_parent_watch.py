"""Workers that stop when their launcher dies: a ``torchrun`` worker watches its parent, the agent.

``torchrun``'s agent starts the workers and stops them on a signal it receives; a ``kill -9`` of the agent (an
out-of-memory killer, a scheduler killing the wrong process) gives it no chance, and its workers, left without a
parent, would train to the end of the run unseen, or wait forever for the agent's rendezvous store when it died
during their start-up. :func:`watch_parent` starts, in a worker (``TORCHELASTIC_RUN_ID`` set), a daemon thread that
compares :func:`os.getppid` every 0.2 s with the agent's PID as read at the first import of ranklit
(:data:`ranklit._agent.AGENT_PID`, not when the watch starts: an agent killed during the command's imports is seen
too). Once the parent has changed (the worker was re-parented) it says so in one line and sends its own process
``SIGTERM``, which is one of ranklit's stops (:mod:`ranklit.training.stops`): every worker notices within 0.2 s,
they agree to stop after the same batch, save ``interrupted.ckpt`` and exit with 143, and ``--resume true``
continues the run. Before training, the ``SIGTERM`` ends the worker at once (nothing trained, nothing to save); in
the run's last batch, it lets the run finish (a finished run ends as finished: exit 0, its last checkpoint).

The ``SIGTERM`` is sent again at each poll until a stop is recorded (one sent while the signal is ignored, in the
middle of the start-up, is not lost), and a worker still running :data:`GRACE_SECONDS` after the agent's death
(processes that no longer answer each other's collectives) exits with code 1 and a line saying so, rather than
train on: the newest checkpoint stays the resume point. Polling rather than ``prctl(PR_SET_PDEATHSIG)``: that Linux
call fires when the parent *thread* that started the worker ends, not the agent process, and exists on Linux only.
Lightning's own launcher needs no watch: its rank 0 is the parent and a process of the run, so its death breaks the
others' collectives.

Example:
    >>> watch_parent({}) is None  # not a torchrun worker: nothing to watch
    True
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping

from ranklit._agent import AGENT_PID
from ranklit.training.stops import stop_requested, stopped_by

__all__ = ["watch_parent"]

POLL_SECONDS = 0.2  # a small run trains several steps a second: the stop must come before its end
GRACE_SECONDS = 300.0  # from the agent's death to the exit of a worker that did not stop (a big checkpoint to save)


def _say(line: str) -> None:
    with contextlib.suppress(OSError):  # a closed stderr must not keep the worker from stopping
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _watch(agent: int, grace: float = GRACE_SECONDS) -> None:
    while os.getppid() == agent:
        time.sleep(POLL_SECONDS)
    _say(f"torchrun's agent (process {agent}) is gone: stopping this worker (process {os.getpid()}) as on a SIGTERM.")
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if stop_requested() is None and stopped_by() is None:
            os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(POLL_SECONDS)
    _say(
        f"error: this torchrun worker (process {os.getpid()}) did not stop within {grace:.0f} s of its agent's "
        "death (the other processes no longer answer?): exiting with code 1 without a checkpoint; `--resume true` "
        "continues from the newest one."
    )
    os._exit(1)


def watch_parent(environ: Mapping[str, str] = os.environ) -> threading.Thread | None:
    """Start the watch of a ``torchrun`` worker's agent (module docstring); the thread, ``None`` outside a worker."""
    if "TORCHELASTIC_RUN_ID" not in environ:
        return None
    agent = AGENT_PID if AGENT_PID is not None else os.getppid()
    watcher = threading.Thread(target=_watch, args=(agent,), name="ranklit-parent-watch", daemon=True)
    watcher.start()
    return watcher
