"""What the tests that start several processes share: a free port, the process group, the environment of a child
``ranklit`` process, its signal dispositions, and subprocess time-outs scaled to the machine's load (one setting)."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import torch.distributed as dist

REPOSITORY = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A TCP port of 127.0.0.1 free now (for a rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def init_gloo(rank: int, world_size: int, port: int) -> None:
    """Join the CPU (gloo) process group of ``world_size`` processes on 127.0.0.1:``port``."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)


def repository_first_on_path() -> str:
    """The ``PYTHONPATH`` of a child process that imports this repository's ``tests`` (and ``ranklit``) first."""
    return os.pathsep.join(filter(None, [str(REPOSITORY), os.environ.get("PYTHONPATH")]))


def child_environment(**extra: str) -> dict[str, str]:
    """The environment of a child ``ranklit`` process: this repository first on ``PYTHONPATH``, one thread a
    process, gloo on the loopback interface; ``extra`` on top."""
    path = repository_first_on_path()
    return os.environ | {"PYTHONPATH": path, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"} | extra


#: The signals the tests send to child processes (or that a child sends itself): each starts with its default action.
SIGNALS_SENT = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGQUIT)


def default_signals() -> None:
    """``preexec_fn`` of every child a test signals: :data:`SIGNALS_SENT` back to their default action.

    An ignored signal stays ignored across ``exec``: under a runner started as a shell's background job
    (``python -m pytest &``) or with ``nohup``, the children would inherit ``SIGINT`` (or ``SIGHUP``) ignored, and a
    test's Ctrl-C would do nothing. (``subprocess``'s ``restore_signals`` resets ``SIGPIPE``/``SIGXFSZ`` only.)
    """
    for signum in SIGNALS_SENT:
        signal.signal(signum, signal.SIG_DFL)


def scaled_timeout(seconds: float) -> float:
    """``seconds`` on an idle machine, stretched by the load per core (at least 1) and by the one setting
    ``RANKLIT_TEST_TIMEOUT_SCALE`` (default 1): a subprocess time-out then fails on a hang, not on a slow machine.

    >>> scaled_timeout(10) >= 10
    True
    """
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    return seconds * max(1.0, load) * float(os.environ.get("RANKLIT_TEST_TIMEOUT_SCALE", "1"))
