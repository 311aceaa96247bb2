"""The run lock (``ranklit.callbacks._locks``): exclusive under a race, a reused PID recognised as stale, a refused
process changing nothing. The commands racing for a run: ``tests/callbacks/test_fault_injection.py``."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ranklit._locks import LockCopied, LockStuck
from ranklit.callbacks._locks import LOCK_FILE, RunLocked, acquire, release, start_time
from tests.callbacks.lock_files import dead_record, live_takeover


def _contend(folder: str, start: float, results: multiprocessing.Queue) -> None:
    time.sleep(max(0.0, start - time.time()))  # every process tries at the same instant
    try:
        acquire(folder)
    except RunLocked:
        results.put("refused")
        return
    results.put("held")
    time.sleep(1.0)  # hold it while the others try
    release(folder)


@pytest.mark.parametrize("stale", [False, True], ids=["free", "stale-lock"])
def test_exactly_one_of_eight_processes_takes_the_lock(stale: bool, tmp_path: Path) -> None:
    if stale:  # a lock of a process that is gone: all eight try to take it over at once
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
        holder = {"pid": int(dead.stdout), "host": socket.gethostname(), "started": "1", "since": "x"}
        (tmp_path / LOCK_FILE).write_text(json.dumps(holder))
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    start = time.time() + 1.0
    processes = [context.Process(target=_contend, args=(str(tmp_path), start, results)) for _ in range(8)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(30)
    outcomes = sorted(results.get(timeout=5) for _ in processes)
    assert outcomes == ["held"] + ["refused"] * 7
    assert not (tmp_path / LOCK_FILE).exists()  # released by its holder
    assert [p.name for p in tmp_path.iterdir()] == []  # no temporary or take-over file left


def test_a_reused_pid_is_stale_and_a_live_holder_refuses_without_a_change(tmp_path: Path, capfd) -> None:
    me = {"pid": os.getpid(), "host": socket.gethostname(), "since": "x"}
    (tmp_path / LOCK_FILE).write_text(json.dumps(me | {"started": "1"}))  # this PID, started at another time
    acquire(tmp_path)
    assert f"PID {os.getpid()} now belongs to another process" in capfd.readouterr().err
    assert json.loads((tmp_path / LOCK_FILE).read_text())["started"] == start_time(os.getpid())
    release(tmp_path)
    assert not (tmp_path / LOCK_FILE).exists()
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        for _ in range(100):  # /proc/<pid>/stat is there as soon as the process is
            if start_time(holder.pid) is not None:
                break
        live = {"pid": holder.pid, "host": socket.gethostname(), "started": start_time(holder.pid), "since": "x"}
        (tmp_path / LOCK_FILE).write_text(json.dumps(live))
        before = (tmp_path / LOCK_FILE).read_bytes(), (tmp_path / LOCK_FILE).stat().st_mtime_ns
        with pytest.raises(RunLocked, match=f"is being trained by process {holder.pid}"):
            acquire(tmp_path)
        assert ((tmp_path / LOCK_FILE).read_bytes(), (tmp_path / LOCK_FILE).stat().st_mtime_ns) == before
        assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_FILE]
    finally:
        holder.kill()
        holder.wait()


def test_a_fresh_takeover_file_of_a_killed_process_is_removed_at_once(tmp_path: Path, capfd) -> None:
    """A ``kill -9`` in the instant of a take-over leaves ``run.lock.takeover`` (under 60 s old) beside the stale
    lock: its process is gone, so it is removed with a line and the lock taken over (it used to refuse with "other
    processes keep taking it over" when no other process existed)."""
    dead = dead_record()
    (tmp_path / LOCK_FILE).write_text(json.dumps(dead))
    (tmp_path / f"{LOCK_FILE}.takeover").write_text(json.dumps(dead))
    acquire(tmp_path)
    err = capfd.readouterr().err
    assert f"Removed {tmp_path / LOCK_FILE}.takeover, left by a process that no longer runs" in err
    assert f"Taking over {tmp_path / LOCK_FILE}" in err
    release(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == []


def test_a_takeover_that_never_finishes_names_the_file_its_age_and_its_process(tmp_path: Path) -> None:
    """A take-over file of a live process that never finishes (here a sleeping process) refuses in one line naming
    the file, its age and its process, and what to remove."""
    with live_takeover(tmp_path) as (pid, guard):
        os.utime(guard, (time.time() - 12, time.time() - 12))
        with pytest.raises(LockStuck) as stuck:
            acquire(tmp_path)
        message = str(stuck.value)
        age = re.search(rf"{re.escape(str(guard))} \((\d+) s old\) is held by process {pid} ", message)
        assert age is not None and 12 <= int(age.group(1)) < 60, message
        assert f"remove {guard} and try again" in message and "\n" not in message


def test_a_copied_live_run_says_its_copied_lock_is_the_cause(tmp_path: Path) -> None:
    """``cp -r`` of a live run copies its ``run.lock``: resuming the copy names the original's process, and says
    that the copied lock is why and how to resume the copy."""
    import shutil

    code = (f"from ranklit.callbacks._locks import acquire; acquire({str(tmp_path / 'run')!r}); "
            "print('held', flush=True); ")
    holder = subprocess.Popen([sys.executable, "-c", code + "import time; time.sleep(60)"], stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        shutil.copytree(tmp_path / "run", tmp_path / "copy")
        with pytest.raises(LockCopied) as refused:
            acquire(tmp_path / "copy")
        message = str(refused.value)
        assert f"was copied from {(tmp_path / 'run' / LOCK_FILE).resolve()}, which process {holder.pid}" in message
        assert f"delete {tmp_path / 'copy' / LOCK_FILE}" in message
        with pytest.raises(RunLocked, match=f"is being trained by process {holder.pid}"):  # the original stays locked
            acquire(tmp_path / "run")
    finally:
        holder.kill()
        holder.wait()
