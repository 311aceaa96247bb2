"""Issue 47, item 6: a take-over file dated in the future (clocks of two nodes that disagree), empty or unreadable
no longer blocks every resume, and no age is printed negative. Through the run lock's API
(:func:`ranklit.callbacks._locks.acquire`, what ``ranklit fit --resume true`` calls first)."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from ranklit._locks import LockStuck
from ranklit.callbacks._locks import LOCK_FILE, acquire, release
from tests.callbacks.lock_files import dead_record, live_takeover

DAY = 86400.0


def _said(text: str) -> str:
    """A regular expression of ``text``, its age of about a day in the future any number of seconds short of it."""
    return re.escape(text).replace("86400", r"86\d\d\d")


def _future(path: Path) -> None:
    os.utime(path, (time.time() + DAY, time.time() + DAY))


TAKEOVERS = [
    pytest.param("", False, "it is empty (left by a process that died while writing it)", id="empty"),
    pytest.param("{\"pid\": 12", False, "it is damaged (not a lock file ranklit wrote)", id="truncated"),
    pytest.param("", True, "it is empty (left by a process that died while writing it); dated 86400 s in the future "
                 "(the clocks of two machines disagree)", id="empty-future"),
    pytest.param(json.dumps({"pid": 4242, "host": "node-17", "started": "9", "since": "2099-01-01 00:00:00"}), True,
                 "it names process 4242 on node-17 (since 2099-01-01 00:00:00), which this machine cannot check; "
                 "dated 86400 s in the future", id="other-node-future"),
]


@pytest.mark.parametrize(("text", "future", "said"), TAKEOVERS)
def test_an_undatable_or_unreadable_takeover_file_is_removed(text: str, future: bool, said: str, tmp_path: Path,
                                                             capfd) -> None:
    """The stale lock of a killed run beside a take-over file that is empty, truncated, or dated a day ahead (by its
    modification time and by the time it records): removed with a line saying what it is, and the lock taken over
    (it used to refuse forever: "(-86376 s old) is held by an unreadable process")."""
    (tmp_path / LOCK_FILE).write_text(json.dumps(dead_record()))
    guard = tmp_path / f"{LOCK_FILE}.takeover"
    guard.write_text(text)
    if future:
        _future(guard)
    acquire(tmp_path)
    err = capfd.readouterr().err
    assert re.search(_said(f"Removed {guard}, {said}"), err) and f"Taking over {tmp_path / LOCK_FILE}" in err, err
    assert " -" not in err, err
    release(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == []


def test_a_live_takeover_dated_in_the_future_says_the_clocks_disagree(tmp_path: Path) -> None:
    """A take-over file of a live process of this machine, dated a day ahead, waits for that process (liveness
    decides, not the date) and refuses in one line that says the clocks disagree, never a negative age."""
    with live_takeover(tmp_path) as (pid, guard):
        _future(guard)
        with pytest.raises(LockStuck) as stuck:
            acquire(tmp_path)
        message = str(stuck.value)
        disagree = f"{guard} (dated 86400 s in the future (the clocks of two machines disagree)) is held by process"
        assert re.search(_said(f"{disagree} {pid} "), message), message
        assert "-8" not in message and "\n" not in message


def test_an_empty_lock_is_taken_over_as_what_it_is(tmp_path: Path, capfd) -> None:
    """An empty ``run.lock`` (a process died while writing it) is taken over with a line saying so (it said "a
    damaged lock: it is damaged")."""
    (tmp_path / LOCK_FILE).write_text("")
    acquire(tmp_path)
    err = capfd.readouterr().err
    assert f"Taking over {tmp_path / LOCK_FILE} from an unreadable lock: it is empty (left by a process that died " \
           "while writing it)." in err, err
    release(tmp_path)
