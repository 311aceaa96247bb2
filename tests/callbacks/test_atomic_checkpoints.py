"""Issue 47, item 0: every checkpoint ``ranklit fit`` writes (``last.ckpt``, ``interrupted.ckpt``, ``best-*.ckpt``)
is atomic, whatever ``$TMPDIR`` is: a ``kill -9`` during the write (:mod:`tests.callbacks.kill_at_write`) or a full
disk (a small ``tmpfs`` under the run, as root) leaves each final name absent or whole, with ``$TMPDIR`` on another
file system (``/dev/shm``) too; ``--resume`` then continues from the previous good checkpoint and ends as the
uninterrupted run, with no ``-v1`` copy beside a best checkpoint. (Lightning's own writer, which ``ranklit fit`` used,
copies a temporary file of ``$TMPDIR`` into the final name when ``$TMPDIR`` is another file system.)"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ranklit._checkpoint import load_checkpoint
from tests.callbacks.faults_harness import RUN, assert_same_run, resume_step, run, signal_at

pytestmark = pytest.mark.timeout(900)
CHECKPOINTS = RUN / "checkpoints"
EVERY_2 = "--checkpoint.every_n_steps=2"


@pytest.fixture(params=["other-fs", pytest.param("same-fs", marks=pytest.mark.long)])
def temporary(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """The ``$TMPDIR`` of the runs: on another file system than ``tmp_path`` (``/dev/shm``, a tmpfs; skipped
    without one), or on the same."""
    if request.param == "same-fs":
        yield tmp_path / "tmp"
        return
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK) or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("no writable /dev/shm on another file system than the test's folder")
    folder = shm / f"ranklit-test-{os.getpid()}-{tmp_path.name}"
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _kill_at_write(name: str, nth: int) -> str:
    args = f'"folder": "{CHECKPOINTS}", "name": "{name}", "nth": {nth}'
    killer = "tests.callbacks.kill_at_write.KillAtWrite"
    return f'--trainer.callbacks+={{"class_path": "{killer}", "init_args": {{{args}}}}}'


def assert_every_checkpoint_whole(folder: Path) -> None:
    """Every file of ``folder`` with a final name (``*.ckpt``) loads; a temporary one (``.<name>.tmp-<pid>``) is no
    checkpoint and may be left by a kill."""
    for path in sorted(folder.glob("*.ckpt")):
        assert path.stat().st_size > 0, f"{path.name} is empty"
        load_checkpoint(path)  # raises on a truncated file


# (kind, the file name part KillAtWrite matches, which write of it, a signal first, the step resumed from)
KINDS = [
    pytest.param("last.ckpt", 2, [], 2, id="last"),  # the epoch-end save, after the step-2 one (last-1.ckpt then)
    # the same writer (SafeCheckpointIO) saves these two: in the long suite, to keep the default one short
    pytest.param("best-", 1, [], 2, id="best", marks=pytest.mark.long),  # the ModelCheckpoint's, step 4
    pytest.param("interrupted.ckpt", 1, [signal_at(3, "SIGTERM")], 2, id="interrupted", marks=pytest.mark.long),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "nth", "extra", "resumed_from"), KINDS)
def test_kill_9_during_a_checkpoint_write_leaves_it_absent_or_whole(
    name: str, nth: int, extra: list[str], resumed_from: int, temporary: Path, references, tmp_path: Path
) -> None:
    temporary.mkdir(exist_ok=True)
    env = {"TMPDIR": str(temporary)}
    killed = run(tmp_path, "single", 0, EVERY_2, _kill_at_write(name, nth), *extra, env=env)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]  # the write was reached
    assert_every_checkpoint_whole(tmp_path / CHECKPOINTS)
    assert resume_step(tmp_path) == resumed_from  # the previous good checkpoint
    result = run(tmp_path, "single", 0, EVERY_2, "--resume=true", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Skipping" not in result.stderr, result.stderr[-3000:]  # nothing damaged to skip
    checkpoints = sorted(p.name for p in (tmp_path / CHECKPOINTS).iterdir())
    assert not [n for n in checkpoints if "-v1" in n or n.startswith(".")], checkpoints  # no copy, no leftover
    assert_every_checkpoint_whole(tmp_path / CHECKPOINTS)
    assert_same_run(tmp_path, references["single", 0])


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Callable[[], object]]:
    """``tmp_path/runs`` on a tmpfs of 12 MiB (room for two checkpoints of the tiny quick start and its logs, not
    three), remounted at 64 MiB by calling the fixture's value; skipped unless this process may mount (root)."""
    runs = tmp_path / "runs"
    runs.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12m", "tmpfs", str(runs)], capture_output=True)
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (root only): {mount.stderr.decode().strip()}")
    try:
        yield lambda: subprocess.run(["mount", "-o", "remount,size=64m", str(runs)], check=True)
    finally:
        subprocess.run(["umount", "-l", str(runs)], check=False)


@pytest.mark.slow
def test_full_disk_leaves_every_checkpoint_absent_or_whole_and_the_run_resumes(
    small_disk, references, tmp_path: Path
) -> None:
    """The epoch-1 ``last.ckpt`` meets the full disk (``$TMPDIR``, ``/tmp``, is another file system); the run fails,
    every final name is absent or whole, and once there is room ``--resume`` continues from the epoch-0 one."""
    full = run(tmp_path, "single", 0)
    assert full.returncode != 0 and "No space left on device" in full.stderr, full.stderr[-3000:]
    folder = tmp_path / CHECKPOINTS
    assert_every_checkpoint_whole(folder)
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".")]  # the failed write removed its file
    assert resume_step(tmp_path) == 4  # the end of epoch 0
    small_disk()
    result = run(tmp_path, "single", 0, "--resume=true")
    assert result.returncode == 0 and "Skipping" not in result.stderr, result.stderr[-3000:]
    assert not [p.name for p in folder.iterdir() if "-v1" in p.name]
    assert_every_checkpoint_whole(folder)
    assert_same_run(tmp_path, references["single", 0])
