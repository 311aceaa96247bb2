"""Fault injection: signal x phase x launcher x loader workers, kill -9 at random steps, damaged checkpoints,
exceptions inside a step (:mod:`tests.callbacks.raise_at`), SLURM's ``SIGUSR1``, signals to ``ranklit test``.

Every case interrupts the tiny quick start (:mod:`tests.callbacks.faults_harness`), checks the exit code and the time
from the signal to the exit, resumes with ``--resume true`` and compares the end of the resumed run with the
uninterrupted run of the same launcher and workers (weights, optimiser state, sampler position, ``metrics.csv`` rows
exactly once). Most cases are marked ``long`` (``RANKLIT_LONG_TESTS=1`` runs them); the default run keeps one kill -9
(then a truncated newest checkpoint and a refused resume) on one process, and (``tests/training/test_ddp_cli.py``) a
group ``SIGTERM`` to a 2-process run, with ``tests/cli/test_resume_cli.py``'s Ctrl-C and ``SIGTERM``, plus an
exception in a forward pass, the SLURM case and a ``SIGTERM`` to ``ranklit test``. With
``RANKLIT_FAULT_TABLE=PATH`` each case appends a row (case, exit code, seconds from signal to exit, step signalled,
resume step, steps lost) to that Markdown file.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from tests.callbacks.faults_harness import (
    RUN,
    STEPS_PER_EPOCH,
    assert_identical_run,
    assert_same_run,
    cli_args,
    folder_digest,
    raise_at,
    resume_step,
    rows,
    run,
    signal_at,
)
from tests.ddp import child_environment, default_signals, scaled_timeout

pytestmark = pytest.mark.timeout(1500)
LONG = pytest.mark.long


def _record(case: str, code: int | str, seconds: float | None, step: int | str, resumed: int | None, lost: int) -> None:
    table = os.environ.get("RANKLIT_FAULT_TABLE")
    if not table:
        return
    new = not Path(table).is_file()
    with open(table, "a") as file:
        if new:
            file.write("| case | exit code | signal to exit (s) | signalled at | resumed from step | steps lost |\n")
            file.write("|---|---|---|---|---|---|\n")
        took = "-" if seconds is None else f"{seconds:.1f}"
        file.write(f"| {case} | {code} | {took} | {step} | {resumed} | {lost} |\n")


# (launcher, workers, signal, phase, step, to): the signal is sent during `phase` at step `step` (see SignalAt)
SIGNALS = [
    *[("single", 0, name, "train", 3, "self") for name in ("SIGINT", "SIGTERM", "SIGUSR1")],
    *[("single", 0, "SIGTERM", phase, step, "self")
      for phase, step in (("baseline", 0), ("validation", 4), ("checkpoint", 4), ("teardown", 8))],
    ("single", 2, "SIGTERM", "train", 6, "self"),
    ("single", 2, "SIGINT", "validation", 4, "self"),
    *[("lightning", 0, "SIGTERM", phase, step, "group")
      for phase, step in (("baseline", 0), ("train", 3), ("validation", 4), ("checkpoint", 4), ("teardown", 8))],
    ("lightning", 0, "SIGINT", "train", 5, "group"),
    ("lightning", 0, "SIGUSR1", "train", 2, "group"),
    ("lightning", 0, "SIGTERM", "train", 3, "0"),  # the launcher's process only
    ("lightning", 0, "SIGTERM", "train", 6, "1"),  # one child only
    ("lightning", 2, "SIGTERM", "train", 5, "group"),
    ("torchrun", 0, "SIGTERM", "train", 3, "group"),
    ("torchrun", 0, "SIGTERM", "validation", 4, "group"),
    ("torchrun", 0, "SIGTERM", "train", 6, "1"),
]


def _case_id(case: tuple) -> str:
    launcher, workers, name, phase, step, to = case
    return f"{launcher}-w{workers}-{name}-{phase}-step{step}-to{to}"


@LONG
@pytest.mark.parametrize("case", SIGNALS, ids=_case_id)
def test_signal_stops_resumably(case: tuple, references: dict, tmp_path: Path) -> None:
    launcher, workers, name, phase, step, to = case
    stopped = run(tmp_path, launcher, workers, signal_at(step, name, phase, to))
    finished = phase == "teardown"  # after the last batch: the run is complete, it ends as finished
    expected = 0 if finished else 128 + getattr(signal, name)
    if launcher != "torchrun":  # torchrun reports its own code for its workers' exit
        assert stopped.returncode == expected, stopped.stderr[-3000:]
    else:
        assert stopped.returncode != 0 or finished, stopped.stderr[-3000:]
    assert stopped.signal_to_exit is not None and stopped.signal_to_exit < 60
    resumed_from = resume_step(tmp_path)
    assert resumed_from is not None
    lost = max(0, step - 1 - resumed_from) if phase == "train" else 0
    assert lost == 0  # a signal never costs a finished step
    if not finished:
        result = run(tmp_path, launcher, workers, "--resume=true")
        assert result.returncode == 0, result.stderr[-3000:]
    assert_same_run(tmp_path, references[launcher, workers])
    _record(_case_id(case), stopped.returncode, stopped.signal_to_exit, step, resumed_from, lost)


KILLS = [
    pytest.param("single", 2, id="single-w2"),
    pytest.param("lightning", 0, id="lightning-w0"),
]


def _kill_9(tmp_path: Path, launcher: str, workers: int, first: int = 3) -> tuple[int, int]:
    """A run with ``every_n_steps: 2`` killed (``SIGKILL`` to all its processes) at a random step from ``first`` (3:
    after its first scheduled save); its step and the step of its newest checkpoint, at most 2 completed steps
    behind."""
    step = random.Random(f"{launcher}{workers}{os.getpid()}").randint(first, 2 * STEPS_PER_EPOCH - 1)
    killed = run(tmp_path, launcher, workers, signal_at(step, "SIGKILL", to="group"), "--checkpoint.every_n_steps=2")
    assert killed.returncode == -signal.SIGKILL
    resumed_from = resume_step(tmp_path)
    assert resumed_from is not None and step - 1 - resumed_from <= 2  # completed steps lost
    _record(f"{launcher}-w{workers}-kill -9-train-step{step}", killed.returncode, killed.signal_to_exit, step,
            resumed_from, step - 1 - resumed_from)
    return step, resumed_from


@LONG
@pytest.mark.parametrize(("launcher", "workers"), KILLS)
def test_kill_9_at_a_random_step_loses_at_most_2_steps(launcher: str, workers: int, references, tmp_path) -> None:
    _kill_9(tmp_path, launcher, workers)
    result = run(tmp_path, launcher, workers, "--resume=true", "--checkpoint.every_n_steps=2")
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(rows(tmp_path)) == len(set(rows(tmp_path)))  # no duplicate row
    assert_same_run(tmp_path, references[launcher, workers])


def test_kill_9_then_a_truncated_newest_checkpoint_and_a_refused_resume(references, tmp_path: Path) -> None:
    """Done-when 3 and 4 in one run: a kill -9 loses at most 2 steps; the newest checkpoint, then truncated, is
    skipped with a message; a refused resume (another sampler seed) leaves every file of the run byte-identical; the
    resumed run ends as the uninterrupted one, with no duplicate row."""
    step, _ = _kill_9(tmp_path, "single", 0, first=5)  # after 2 saves: one to fall back to
    newest = tmp_path / RUN / "checkpoints" / "last.ckpt"
    data = newest.read_bytes()
    newest.write_bytes(data[: len(data) // 2])  # what a kill during a non-atomic write leaves
    before = folder_digest(tmp_path)
    refused = run(tmp_path, "single", 0, "--resume=true", "--data.batch_sampler.init_args.seed=7")
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert "error: " in refused.stderr and "seed" in refused.stderr and "Traceback" not in refused.stderr
    assert folder_digest(tmp_path) == before  # byte for byte, modification times included
    result = run(tmp_path, "single", 0, "--resume=true", "--checkpoint.every_n_steps=2")
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Skipping {Path('runs/quickstart/version_0/checkpoints/last.ckpt')}: does not load" in result.stderr
    assert len(rows(tmp_path)) == len(set(rows(tmp_path)))  # no duplicate row
    assert_same_run(tmp_path, references["single", 0])
    _record("single-w0 refused resume (other sampler seed)", refused.returncode, None, step, "-", 0)


@LONG
@pytest.mark.parametrize("damage", ["truncated", "empty"])
def test_damaged_newest_checkpoint_is_skipped(damage: str, references, tmp_path) -> None:
    stopped = run(tmp_path, "single", 0, signal_at(7, "SIGTERM"), "--checkpoint.every_n_steps=2")
    assert stopped.returncode == 143
    newest = tmp_path / RUN / "checkpoints" / "interrupted.ckpt"
    data = newest.read_bytes()
    newest.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"")
    result = run(tmp_path, "single", 0, "--resume=true", "--checkpoint.every_n_steps=2")
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Skipping {Path('runs/quickstart/version_0/checkpoints/interrupted.ckpt')}: does not load" in result.stderr
    assert_same_run(tmp_path, references["single", 0])
    _record(f"single-w0-{damage} interrupted.ckpt at step 7", result.returncode, None, 7, 6, 1)


@LONG
def test_refused_resume_leaves_the_run_byte_identical(references, tmp_path: Path) -> None:
    stopped = run(tmp_path, "lightning", 0, signal_at(3, "SIGTERM", to="group"))
    assert stopped.returncode == 143
    before = folder_digest(tmp_path)
    refused = run(tmp_path, "single", 0, "--resume=true")  # 1 process cannot continue a 2-process epoch
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert "error: " in refused.stderr and "Traceback" not in refused.stderr
    assert folder_digest(tmp_path) == before
    result = run(tmp_path, "lightning", 0, "--resume=true")
    assert result.returncode == 0, result.stderr[-3000:]
    assert_same_run(tmp_path, references["lightning", 0])
    _record("lightning-w0 refused resume (1 process, mid-epoch)", refused.returncode, None, 3, 3, 0)


# (where, step): inside training step 6, or in the validation after step 8 (the last one)
FAULTS = [
    pytest.param("forward", 6, id="forward"),
    *[pytest.param(where, 6, id=where, marks=LONG) for where in ("backward", "optimizer", "batch_start")],
    pytest.param("validation", 8, id="validation", marks=LONG),
]


@pytest.mark.slow
@pytest.mark.parametrize(("where", "step"), FAULTS)
def test_exception_inside_a_step_resumes_from_the_state_before_it(where: str, step: int, references, tmp_path) -> None:
    """An exception in step 6 (after the forward pass changed the batch-norm statistics, in the backward pass, after
    the optimiser updated the weights, or in a batch-start callback) or in the epoch-end validation of step 8 writes
    no checkpoint of the half-done step: the epoch-end ``last.ckpt`` of step 4 stays the resume point, and the
    resumed run ends bit for bit as the uninterrupted one, ``metrics.csv`` included."""
    failed = run(tmp_path, "single", 0, raise_at(step, where))
    assert failed.returncode == 1 and f"injected fault: {where} of step {step}" in failed.stderr, failed.stderr[-3000:]
    inside = "a validation at global step 8" if where == "validation" else "a training step at global step 5"
    assert f"inside {inside}: no checkpoint written" in failed.stderr
    assert not (tmp_path / RUN / "checkpoints" / "interrupted.ckpt").exists()
    assert resume_step(tmp_path) == STEPS_PER_EPOCH
    result = run(tmp_path, "single", 0, "--resume=true")
    assert result.returncode == 0, result.stderr[-3000:]
    assert_identical_run(tmp_path, references["single", 0])
    lost = step - 1 - STEPS_PER_EPOCH if where != "validation" else step - STEPS_PER_EPOCH
    _record(f"single-w0 exception in {where} of step {step}", failed.returncode, None, step, STEPS_PER_EPOCH, lost)


def _test_command(folder: Path, checkpoint: Path, processes: int, *extra: str) -> subprocess.CompletedProcess:
    """``ranklit test`` of the tiny quick start's ``checkpoint`` in ``folder`` (8 images a batch: several batches)
    on ``processes`` processes (Lightning's launcher)."""
    args = ["test", *cli_args(processes, 0)[1:], f"--trainer.devices={processes}", "--data.eval_batch_size=8",
            f"--ckpt_path={checkpoint}", *(["--trainer.strategy=ddp"] if processes > 1 else [])]
    env = child_environment()
    return subprocess.run([sys.executable, "-m", "ranklit.cli", *args, *extra], cwd=folder, env=env, text=True,
                          capture_output=True, timeout=scaled_timeout(300), start_new_session=True,
                          preexec_fn=default_signals)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("processes", "name", "to"),
    [(1, "SIGTERM", "self"), pytest.param(1, "SIGINT", "self", marks=LONG),
     pytest.param(2, "SIGTERM", "group", marks=LONG), pytest.param(2, "SIGTERM", "1", marks=LONG)],
)
def test_signal_to_ranklit_test_claims_no_results(processes: int, name: str, to: str, references, tmp_path) -> None:
    """``ranklit test`` stopped by a signal in its first batch (to its process, to every process of a 2-process
    test, to one of them) exits with ``128 + n`` and logs and prints no metrics; the same command run to the end
    logs them (the uninterrupted evaluation)."""
    checkpoint = references["single", 0] / RUN / "checkpoints" / "last.ckpt"
    stopped = _test_command(tmp_path, checkpoint, processes, signal_at(1, name, "test", to))
    assert stopped.returncode == 128 + getattr(signal, name), stopped.stderr[-3000:]
    assert "test/map_at_r" not in stopped.stdout and "Traceback" not in stopped.stderr
    metrics = tmp_path / RUN / "metrics.csv"
    assert not metrics.exists() or "test/" not in metrics.read_text()
    finished = _test_command(tmp_path, checkpoint, processes)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert "test/map_at_r" in finished.stdout
    assert "test/map_at_r" in (tmp_path / "runs/quickstart/version_1/metrics.csv").read_text()
    case = f"ranklit test, {processes} process(es), {name} to {to} in batch 1"
    _record(case, stopped.returncode, None, "test batch 1", "-", 0)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("launcher", "reference"), [("single", "single"), pytest.param("srun", "lightning", marks=LONG)]
)
def test_slurm_sigusr1_stops_saves_requeues_and_resumes(launcher: str, reference: str, references, tmp_path) -> None:
    """Under SLURM (its variables faked, one task or a 2-task step of :mod:`tests.callbacks.fake_srun`, a fake
    ``scontrol`` on ``PATH``) ``SIGUSR1`` during step 3 stops after that batch, saves ``interrupted.ckpt`` in the run
    folder (no ``hpc_ckpt_*.ckpt``), requeues the job once with ``--requeue true`` and exits 138; a run that was not
    asked to resume refuses Lightning's ``hpc_ckpt`` (exit 2, nothing written); ``--resume true`` continues from
    ``interrupted.ckpt``, never the ``hpc_ckpt``, into the uninterrupted run (of Lightning's launcher for 2 tasks)."""
    bin_folder, log = tmp_path / "bin", tmp_path / "scontrol.log"
    bin_folder.mkdir()
    (bin_folder / "scontrol").write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    (bin_folder / "scontrol").chmod(0o755)
    slurm = {"SLURM_NTASKS": "1", "SLURM_JOB_ID": "4242", "SLURM_JOB_NAME": "train", "SLURM_PROCID": "0",
             "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_NODELIST": "localhost",
             "PATH": f"{bin_folder}{os.pathsep}{os.environ['PATH']}"}
    folder = tmp_path / "job"
    to = "self" if launcher == "single" else "group"
    stopped = run(folder, launcher, 0, signal_at(3, "SIGUSR1", to=to), "--resume=true", "--requeue=true", env=slurm)
    assert stopped.returncode == 138, stopped.stderr[-3000:]
    assert [p.name for p in folder.rglob("*.ckpt")] == ["interrupted.ckpt"] and resume_step(folder) == 3
    assert log.read_text() == "requeue 4242\n"
    hpc = torch.load(folder / RUN / "checkpoints" / "interrupted.ckpt", map_location="cpu", weights_only=False)
    hpc["state_dict"] = {name: value + 1 for name, value in hpc["state_dict"].items()}  # a state unlike any other
    torch.save(hpc, folder / "hpc_ckpt_1.ckpt")  # what Lightning's own handler (or an older ranklit) left
    before = folder_digest(folder)
    for extra, named in (([], "hpc_ckpt_1.ckpt"), (["--requeue=true"], "add `--resume true`")):
        refused = run(folder, launcher, 0, *extra, env=slurm)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
        assert "error: " in refused.stderr and named in refused.stderr
        assert folder_digest(folder) == before
    resumed = run(folder, launcher, 0, "--resume=true", "--requeue=true", env=slurm)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert log.read_text() == "requeue 4242\n"  # a finished run is not requeued
    (assert_identical_run if launcher == "single" else assert_same_run)(folder, references[reference, 0])
    _record(f"{launcher}-w0 SLURM SIGUSR1 --requeue true, step 3", stopped.returncode, stopped.signal_to_exit, 3, 3, 0)


# --- issue 30 (part A): launches racing for one run, copied folders, stale locks, every checkpoint damaged ----------

_PAUSE = '--trainer.callbacks+={"class_path": "tests.callbacks.pause.PauseAtStart", "init_args": {"seconds": 5}}'
RACES = [
    pytest.param(2, 0, id="2-launches", marks=pytest.mark.slow),
    *[pytest.param(n, trial, id=f"{n}-launches-trial{trial}", marks=LONG) for n in (2, 3) for trial in range(1, 6)],
]


@pytest.mark.parametrize(("launches", "trial"), RACES)
def test_resumes_launched_together_train_once(launches: int, trial: int, references, tmp_path: Path) -> None:
    """Done-when 1: ``launches`` ``--resume true`` of one stopped run, started in the same instant: exactly one
    trains (the others exit 2 on the lock, before writing anything), and the run ends as the uninterrupted one."""
    stopped = run(tmp_path, "single", 0, signal_at(3, "SIGTERM"))
    assert stopped.returncode == 143, stopped.stderr[-3000:]
    with ThreadPoolExecutor(launches) as pool:  # each thread starts its command at once and waits for it
        results = list(pool.map(lambda _: run(tmp_path, "single", 0, "--resume=true", _PAUSE), range(launches)))
    codes = sorted(r.returncode for r in results)
    assert codes == [0] + [2] * (launches - 1), [r.stderr[-2000:] for r in results]
    for refused in (r for r in results if r.returncode == 2):
        assert "is being trained by process" in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / RUN / "run.lock").exists() and not list((tmp_path / RUN).glob(".run.lock*"))
    assert_same_run(tmp_path, references["single", 0])  # weights, optimiser, sampler, every row exactly once
    _record(f"{launches} x --resume true at once (trial {trial})", "/".join(map(str, codes)), None, 3, 3, 0)


@pytest.mark.slow
def test_copied_folder_with_a_reused_pid_lock_resumes_its_most_advanced_checkpoint(references, tmp_path: Path) -> None:
    """A run folder copied file by file (new modification times, here inverted: the least advanced checkpoint is the
    newest file) whose ``run.lock`` names a live PID (this test's) with another start time, as after a ``kill -9``
    and a PID reused: the lock is taken over with a line, the resume starts from the most advanced checkpoint, and
    the run ends as the uninterrupted one."""
    original, copy = tmp_path / "original", tmp_path / "copy"
    stopped = run(original, "single", 0, signal_at(7, "SIGTERM"), "--checkpoint.every_n_steps=5")
    assert stopped.returncode == 143, stopped.stderr[-3000:]
    shutil.copytree(original / "runs", copy / "runs", copy_function=shutil.copyfile)
    checkpoints = copy / RUN / "checkpoints"
    by_progress = ["interrupted.ckpt", "last.ckpt", "last-1.ckpt"]  # steps 6 (batch 7 replayed), 5, 4
    for age, name in enumerate(by_progress):
        os.utime(checkpoints / name, (1_000 + age, 1_000 + age))  # the least advanced is the newest
    lock = f'{{"pid": {os.getpid()}, "host": "{socket.gethostname()}", "started": "1", "since": "x"}}'
    (copy / RUN / "run.lock").write_text(lock)
    result = run(copy, "single", 0, "--resume=true", "--checkpoint.every_n_steps=5")
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"PID {os.getpid()} now belongs to another process" in result.stderr
    assert f"from {Path('runs/quickstart/version_0/checkpoints/interrupted.ckpt')}" in result.stderr
    assert_same_run(copy, references["single", 0])
    _record("copied folder, mtimes inverted", result.returncode, None, 7, 6, 0)
    _record("stale lock, PID reused (other start time)", result.returncode, None, 7, 6, 0)


@LONG
def test_every_resumable_checkpoint_damaged(references, tmp_path: Path) -> None:
    """``last*.ckpt`` and ``interrupted.ckpt`` all damaged: ``--resume true`` exits 2 naming each file and why,
    leaving the run byte-identical, without (then with) the complete ``best-*.ckpt`` offered as the fallback;
    ``--resume or_fresh`` starts a new version; ``--ckpt_path`` of the best continues the run to its end."""
    stopped = run(tmp_path, "single", 0, signal_at(6, "SIGTERM"))
    assert stopped.returncode == 143, stopped.stderr[-3000:]
    checkpoints = tmp_path / RUN / "checkpoints"
    (checkpoints / "last.ckpt").write_bytes((checkpoints / "last.ckpt").read_bytes()[:1000])
    (checkpoints / "interrupted.ckpt").write_bytes(b"")
    (best,) = checkpoints.glob("best-*.ckpt")
    aside = tmp_path / best.name
    best.rename(aside)
    before = folder_digest(tmp_path / "runs")
    refused = run(tmp_path, "single", 0, "--resume=true")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
    for name in ("last.ckpt", "interrupted.ckpt"):
        assert f"{Path('runs/quickstart/version_0/checkpoints') / name}: does not load" in refused.stderr
    assert "--resume or_fresh" in refused.stderr and "best" not in refused.stderr
    assert folder_digest(tmp_path / "runs") == before
    aside.rename(best)
    before = folder_digest(tmp_path / "runs")
    refused = run(tmp_path, "single", 0, "--resume=true")
    assert refused.returncode == 2 and f"--ckpt_path {best.relative_to(tmp_path)}`" in refused.stderr
    assert folder_digest(tmp_path / "runs") == before
    fresh = run(tmp_path, "single", 0, "--resume=or_fresh", "--trainer.max_steps=1")
    assert fresh.returncode == 0 and "starting a fresh run" in fresh.stderr, fresh.stderr[-3000:]
    assert (tmp_path / "runs/quickstart/version_1/metrics.csv").is_file()
    assert folder_digest(tmp_path / "runs/quickstart/version_0") == {
        k.removeprefix("quickstart/version_0/"): v for k, v in before.items() if "version_0" in k
    }
    result = run(tmp_path, "single", 0, f"--ckpt_path={best.relative_to(tmp_path)}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert_same_run(tmp_path, references["single", 0])
    _record("every resumable checkpoint damaged, no best", 2, None, 6, "-", 0)
    _record("every resumable checkpoint damaged, best offered, resumed from it", result.returncode, None, 6, 4, 1)
