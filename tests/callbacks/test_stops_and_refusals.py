"""Issue 41: a stop by signal exits ``128 + n`` whatever the checkpoint setting, and a refused resume leaves the run
folder byte-identical (its ``run.lock`` included). The tiny quick start of :mod:`tests.callbacks.faults_harness`."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.callbacks.faults_harness import (
    RUN,
    STEPS_PER_EPOCH,
    assert_same_run,
    folder_digest,
    resume_step,
    rows,
    run,
    signal_at,
)

pytestmark = pytest.mark.timeout(1500)
LONG = pytest.mark.long
OFF = "--trainer.enable_checkpointing=false"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("launcher", "name", "to"),
    [("single", "SIGTERM", "self"), pytest.param("single", "SIGINT", "self", marks=LONG),
     pytest.param("single", "SIGUSR1", "self", marks=LONG), pytest.param("lightning", "SIGTERM", "group", marks=LONG),
     pytest.param("torchrun", "SIGTERM", "group", marks=LONG)],
)
def test_checkpointing_off_a_signal_exits_128_plus_n(launcher: str, name: str, to: str, tmp_path: Path) -> None:
    """``--trainer.enable_checkpointing false``: a signal in step 3 stops the run after that batch (no later row) with
    exit code ``128 + n`` (Lightning's own handler ended it with 0 after 3 batches), writes no checkpoint, and a group
    ``SIGTERM`` to a 2-process run does not hang it."""
    stopped = run(tmp_path, launcher, 0, signal_at(3, name, to=to), OFF)
    if launcher == "torchrun":  # torchrun reports 1 for its workers' 143 (README)
        assert stopped.returncode != 0 and "exitcode  : 143" in stopped.stderr, stopped.stderr[-3000:]
    else:
        assert stopped.returncode == 128 + getattr(signal, name), stopped.stderr[-3000:]
    assert stopped.signal_to_exit is not None and stopped.signal_to_exit < 60
    assert max(step for step, _ in rows(tmp_path)) < 3  # stopped after batch 3 (rows of steps 0-2)
    assert not list(tmp_path.rglob("*.ckpt")) and not (tmp_path / RUN / "run.lock").exists()
    if launcher == "single":  # the stop line says nothing is saved (it used to promise a checkpoint)
        line = f"{name}: stopping at the next consistent point (checkpointing is off: nothing is saved)"
        assert line in stopped.stderr, stopped.stderr[-3000:]


@pytest.mark.slow
def test_started_with_sigint_ignored_a_sigterm_still_stops_and_saves(tmp_path: Path) -> None:
    """Issue 47, item 2: ``ranklit fit`` started as a shell's background job (``SIGINT`` ignored) stops on
    ``SIGTERM`` after the batch, with exit code 143, one stop line and ``interrupted.ckpt`` at that step."""
    stopped = run(tmp_path, "single", 0, signal_at(3, "SIGTERM"), ignored=(signal.SIGINT,))
    assert stopped.returncode == 143 and "Traceback" not in stopped.stderr, stopped.stderr[-3000:]
    assert "SIGTERM: stopping at the next consistent point" in stopped.stderr
    assert resume_step(tmp_path) == 3 and (tmp_path / RUN / "checkpoints" / "interrupted.ckpt").is_file()


@LONG
def test_checkpointing_off_resume_then_sigterm_exits_143_and_keeps_the_checkpoints(references, tmp_path) -> None:
    """``--resume true`` with checkpointing off continues the run from its checkpoint; a ``SIGTERM`` in it exits 143,
    adds no checkpoint and changes none; a resume with checkpoints then ends as the uninterrupted run."""
    stopped = run(tmp_path, "single", 0, signal_at(3, "SIGTERM"))
    assert stopped.returncode == 143, stopped.stderr[-3000:]
    checkpoints = {k: v for k, v in folder_digest(tmp_path).items() if k.endswith(".ckpt")}
    again = run(tmp_path, "single", 0, "--resume=true", OFF, signal_at(6, "SIGTERM"))
    assert again.returncode == 143, again.stderr[-3000:]
    assert {k: v for k, v in folder_digest(tmp_path).items() if k.endswith(".ckpt")} == checkpoints
    result = run(tmp_path, "single", 0, "--resume=true")
    assert result.returncode == 0, result.stderr[-3000:]
    assert_same_run(tmp_path, references["single", 0])


REFUSALS = [
    pytest.param("single", ["--data.batch_sampler.init_args.batches_per_epoch=5"], id="other-batches-per-epoch"),
    pytest.param("lightning", [], id="1-process-mid-epoch-of-2", marks=LONG),
]


@pytest.mark.slow
@pytest.mark.parametrize(("first", "extra"), REFUSALS)
def test_a_resume_refused_by_the_sampler_check_leaves_no_lock(first: str, extra: list[str], tmp_path: Path) -> None:
    """A resume refused in ``on_train_start`` (another ``batches_per_epoch``, or one process continuing a 2-process
    epoch) exits 2 in one line and leaves every file of the run byte-identical: no ``run.lock`` left behind."""
    stopped = run(tmp_path, first, 0, signal_at(3, "SIGTERM", to="self" if first == "single" else "group"))
    assert stopped.returncode == 143, stopped.stderr[-3000:]
    before = folder_digest(tmp_path)
    refused = run(tmp_path, "single", 0, "--resume=true", *extra)
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert "error: " in refused.stderr and "Traceback" not in refused.stderr
    assert folder_digest(tmp_path) == before


@LONG
def test_torchrun_workers_stop_resumably_when_their_agent_is_killed(references, tmp_path: Path) -> None:
    """``kill -9`` of the ``torchrun`` agent in step 3: both workers notice their parent is gone, stop after the same
    batch and save ``interrupted.ckpt`` (they used to train to the end of the run, unseen); the resumed run ends as
    the uninterrupted one."""
    killed = run(tmp_path, "torchrun", 0, signal_at(3, "SIGKILL", to="parent"))
    assert killed.returncode == -signal.SIGKILL and killed.signal_to_exit is not None
    assert killed.signal_to_exit < 60, killed.stderr[-3000:]  # the workers' exit closes the pipe the harness reads
    stopped_at = resume_step(tmp_path)
    assert stopped_at is not None and 3 <= stopped_at < 2 * STEPS_PER_EPOCH, killed.stderr[-3000:]
    assert (tmp_path / RUN / "checkpoints" / "interrupted.ckpt").is_file()
    result = run(tmp_path, "torchrun", 0, "--resume=true")
    assert result.returncode == 0, result.stderr[-3000:]
    assert_same_run(tmp_path, references["torchrun", 0])
