"""A fixture's files built once per test session, whichever pytest-xdist worker asks first.

A ``scope="session"`` fixture is built once per *worker* under ``pytest -n``: the fault-injection references and the
deploy tests' trained run (seconds of training each) were built on both workers. :func:`built_once` builds into a
folder of the session's shared temporary root (the parent of the workers' own ones) under a file lock: the first
worker builds, the others wait for it and read the same files. A build that fails leaves no mark: the next asking
test builds again (and fails the same way, naming its own cause).
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder ``name`` of this test session, ``build(folder)`` run into it by the first test (of any worker) that
    asks; the files are shared, so a test must not change them."""
    base = factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # shared by this session's workers only
    folder, done = root / f"built-{name}", root / f"built-{name}.done"
    with open(root / f"built-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder
