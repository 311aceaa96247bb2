"""Issue 41's "never tried" cases (the long suite): ``validate`` under ``SIGTERM``, ``kill -9`` of a ``test``, a
2-process ``test`` against the 1-process one, the checkpoints folder deleted mid-run, ``SIGHUP``, ``SIGSTOP`` /
``SIGCONT`` and a ``SIGTERM`` to a suspended job; each compared with the uninterrupted run where it resumes. (Two
``ranklit index`` / ``predict`` / ``data prepare`` at once: ``tests/deploy/test_output_locks.py``,
``tests/data/prepare/test_bombs_and_locks.py``; checkpointing off with ``--resume``, ``--requeue``:
``tests/callbacks/test_stops_and_refusals.py``, ``tests/cli/test_resume_refusals.py``.)"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.callbacks.faults_harness import (
    RUN,
    assert_identical_run,
    assert_same_run,
    cli_args,
    resume_step,
    run,
    signal_at,
)
from tests.ddp import child_environment, default_signals, scaled_timeout

pytestmark = [pytest.mark.long, pytest.mark.timeout(1500)]


def _evaluate(command: str, folder: Path, checkpoint: Path, processes: int, *extra: str) -> subprocess.CompletedProcess:
    """``ranklit validate``/``test`` of ``checkpoint`` in ``folder`` (8 images a batch) on ``processes`` processes."""
    args = [command, *cli_args(processes, 0)[1:], f"--trainer.devices={processes}", "--data.eval_batch_size=8",
            f"--ckpt_path={checkpoint}", *(["--trainer.strategy=ddp"] if processes > 1 else [])]
    env = child_environment()
    return subprocess.run([sys.executable, "-m", "ranklit.cli", *args, *extra], cwd=folder, env=env, text=True,
                          capture_output=True, timeout=scaled_timeout(300), start_new_session=True,
                          preexec_fn=default_signals)


def _logged(folder: Path, version: int, prefix: str) -> dict[str, float]:
    metrics = folder / f"runs/quickstart/version_{version}/metrics.csv"
    if not metrics.is_file():
        return {}
    with metrics.open() as file:
        return {k: float(v) for row in csv.DictReader(file) for k, v in row.items() if k.startswith(prefix) and v}


def test_validate_under_sigterm_claims_no_results(references, tmp_path: Path) -> None:
    checkpoint = references["single", 0] / RUN / "checkpoints" / "last.ckpt"
    stopped = _evaluate("validate", tmp_path, checkpoint, 1, signal_at(1, "SIGTERM", "baseline"))
    assert stopped.returncode == 143, stopped.stderr[-3000:]
    assert "val/map" not in stopped.stdout and "Traceback" not in stopped.stderr
    assert not _logged(tmp_path, 0, "val/")
    finished = _evaluate("validate", tmp_path, checkpoint, 1)
    assert finished.returncode == 0 and "val/map" in finished.stdout, finished.stderr[-3000:]


def test_kill_9_of_a_test_then_the_test_again(references, tmp_path: Path) -> None:
    checkpoint = references["single", 0] / RUN / "checkpoints" / "last.ckpt"
    killed = _evaluate("test", tmp_path, checkpoint, 1, signal_at(1, "SIGKILL", "test"))
    assert killed.returncode == -signal.SIGKILL and not _logged(tmp_path, 0, "test/")
    finished = _evaluate("test", tmp_path, checkpoint, 1)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert _logged(tmp_path, 1, "test/map_at_r")


def test_a_2_process_test_logs_the_metrics_of_the_1_process_test(references, tmp_path: Path) -> None:
    checkpoint = references["single", 0] / RUN / "checkpoints" / "last.ckpt"
    for processes in (1, 2):
        result = _evaluate("test", tmp_path, checkpoint, processes)
        assert result.returncode == 0, result.stderr[-3000:]
    one, two = _logged(tmp_path, 0, "test/"), _logged(tmp_path, 1, "test/")
    assert one and one.keys() == two.keys()
    assert all(abs(one[k] - two[k]) < 1e-6 for k in one), (one, two)


def test_the_checkpoints_folder_deleted_mid_run(references, tmp_path: Path) -> None:
    """Deleted at the start of step 6 (after the epoch-1 ``last.ckpt``): the next saves create it again, the run
    ends as the uninterrupted one."""
    folder = str(RUN / "checkpoints")
    delete = f'--trainer.callbacks+={{"class_path": "tests.callbacks.delete_at.DeleteAt", "init_args": {{"step": 6, "folder": "{folder}"}}}}'  # noqa: E501
    result = run(tmp_path, "single", 0, delete)
    assert result.returncode == 0, result.stderr[-3000:]
    assert_identical_run(tmp_path, references["single", 0])


def test_sighup_stops_resumably_with_129(references, tmp_path: Path) -> None:
    stopped = run(tmp_path, "single", 0, signal_at(3, "SIGHUP"))
    assert stopped.returncode == 129, stopped.stderr[-3000:]
    assert resume_step(tmp_path) == 3
    result = run(tmp_path, "single", 0, "--resume=true")
    assert result.returncode == 0, result.stderr[-3000:]
    assert_same_run(tmp_path, references["single", 0])


@pytest.mark.parametrize(("name", "then", "code"), [("resumed", [signal.SIGCONT], 0),
                                                    ("terminated", [signal.SIGTERM, signal.SIGCONT], 143)])
def test_a_suspended_run(name: str, then: list[int], code: int, references, tmp_path: Path) -> None:
    """``SIGSTOP`` to the run's group in step 3 (a scheduler suspending the job), then ``SIGCONT`` (it finishes as the
    uninterrupted run, bit for bit) or ``SIGTERM`` and ``SIGCONT`` (a suspended job cancelled: exit 143, resumable)."""
    stamp = tmp_path / "signal.txt"

    def during(process: subprocess.Popen) -> None:
        while not stamp.is_file():
            time.sleep(0.1)
        time.sleep(2)  # suspended for 2 s
        for signum in then:
            os.killpg(process.pid, signum)
            time.sleep(1)

    result = run(tmp_path, "single", 0, signal_at(3, "SIGSTOP", to="group"), during=during)
    assert result.returncode == code, result.stderr[-3000:]
    if code:
        assert resume_step(tmp_path) == 3
        resumed = run(tmp_path, "single", 0, "--resume=true")
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert_same_run(tmp_path, references["single", 0])
    else:
        assert_identical_run(tmp_path, references["single", 0])
