"""Lock files for the run-lock tests: the record of a process that no longer runs, and a take-over file held by a
live process of this machine."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ranklit.callbacks._locks import LOCK_FILE, start_time


def dead_record() -> dict[str, object]:
    """The lock record of a process of this machine that has exited."""
    pid = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                             text=True).stdout)
    return {"pid": pid, "host": socket.gethostname(), "started": "1", "since": "x"}


@contextmanager
def live_takeover(folder: Path) -> Iterator[tuple[int, Path]]:
    """A stale ``run.lock`` in ``folder`` beside a ``run.lock.takeover`` of a live (sleeping) process of this
    machine, killed on exit: ``(its pid, the take-over file)``."""
    (folder / LOCK_FILE).write_text(json.dumps(dead_record()))
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        while start_time(sleeper.pid) is None:
            time.sleep(0.01)
        live = {"pid": sleeper.pid, "host": socket.gethostname(), "started": start_time(sleeper.pid), "since": "x"}
        guard = folder / f"{LOCK_FILE}.takeover"
        guard.write_text(json.dumps(live))
        yield sleeper.pid, guard
    finally:
        sleeper.kill()
        sleeper.wait()
