"""Runs of the tiny quick start for the fault-injection tests: launch, signal, resume, compare with a reference.

A run trains 2 epochs of 4 optimiser steps (per process) with a validation per epoch and a ``metrics.csv`` row per
step, on one process, two processes launched by Lightning (``--trainer.devices 2``, CPU/gloo) or two launched by
``torchrun``, with 0 or 2 loader workers. :func:`run` starts one in its own process group and measures the time from
the signal (stamped by :class:`tests.cli.signals.SignalAt`) to the exit of the command; :func:`final_state` reads what
an uninterrupted and a resumed run must share.
"""

from __future__ import annotations

import csv
import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tests.ddp import child_environment, default_signals, free_port
from tests.tiny import synthetic_args

REPOSITORY = Path(__file__).resolve().parents[2]
STEPS_PER_EPOCH, EPOCHS = 4, 2
RUN = Path("runs/quickstart/version_0")


def cli_args(processes: int, workers: int) -> list[str]:
    """The tiny quick start (its keys live here only: adapt them when the config changes)."""
    return [
        "fit", "--config", str(REPOSITORY / "configs" / "quickstart.yaml"),
        "--model.net.init_args.backbone=test_resnet", "--model.net.init_args.pretrained=false",
        *synthetic_args(fine_per_parent=8, images_per_class=6), "--data.batch_sampler.init_args.p=4",
        "--data.batch_sampler.init_args.k=2",
        f"--data.batch_sampler.init_args.batches_per_epoch={STEPS_PER_EPOCH * processes}",
        "--data.image_size=32", "--data.resize_size=32", "--data.crop_size=32", "--data.eval_batch_size=64",
        f"--data.num_workers={workers}", f"--trainer.max_epochs={EPOCHS}", "--trainer.check_val_every_n_epoch=1",
        "--trainer.log_every_n_steps=1", "--trainer.accelerator=cpu", "--trainer.enable_progress_bar=false",
        "--trainer.enable_model_summary=false", "--trainer.deterministic=true",
    ]


def signal_at(step: int, name: str, phase: str = "train", to: str = "self") -> str:
    """The ``--trainer.callbacks+=`` argument adding a :class:`tests.cli.signals.SignalAt`."""
    args = f'"step": {step}, "signal": "{name}", "phase": "{phase}", "to": "{to}", "stamp": "signal.txt"'
    return f'--trainer.callbacks+={{"class_path": "tests.cli.signals.SignalAt", "init_args": {{{args}}}}}'



@dataclass
class Result:
    """A finished command: its exit code, stderr, and the seconds from the signal to its exit (``None``: none)."""

    returncode: int
    stderr: str
    signal_to_exit: float | None


def run(
    folder: Path,
    launcher: str,
    workers: int,
    *extra: str,
    timeout: float = 400,
    env: dict[str, str] | None = None,
    during: Callable[[subprocess.Popen], None] | None = None,
    ignored: tuple[int, ...] = (),
) -> Result:
    """Run ``ranklit fit`` in ``folder`` with ``launcher`` (``"single"``, ``"lightning"``, ``"torchrun"``, ``"srun"``:
    :mod:`tests.callbacks.fake_srun`), with the variables ``env`` added to the environment; ``during(process)`` runs
    in a thread while it runs (signals sent from outside: ``SIGCONT``). The command starts with the default action
    of every signal the tests send (:func:`tests.ddp.default_signals`) but those of ``ignored`` (``SIGINT``: a
    shell's background job)."""
    folder.mkdir(parents=True, exist_ok=True)
    processes = 1 if launcher == "single" else 2
    args = [*cli_args(processes, workers), *extra]
    if launcher == "lightning":
        args += ["--trainer.devices=2", "--trainer.strategy=ddp"]
    elif launcher in ("torchrun", "srun"):
        args += ["--trainer.devices=2", "--trainer.strategy=ddp"]
    else:
        args += ["--trainer.devices=1"]
    command = [sys.executable, "-m", "ranklit.cli", *args]
    if launcher == "torchrun":
        rendezvous = ["--master-addr", "127.0.0.1", "--master-port", str(free_port())]
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", *rendezvous,
                   "-m", "ranklit.cli", *args]
    elif launcher == "srun":  # one SLURM job step of 2 tasks: give `env` the job's SLURM variables
        command = [sys.executable, str(REPOSITORY / "tests" / "callbacks" / "fake_srun.py"), "2", *command]
        env = {"MASTER_PORT": str(free_port())} | (env or {})
    env = child_environment(**(env or {}))
    stamp = folder / "signal.txt"
    stamp.unlink(missing_ok=True)
    process = subprocess.Popen(command, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, start_new_session=True, preexec_fn=lambda: _start_signals(ignored))
    if during is not None:
        threading.Thread(target=during, args=(process,), daemon=True).start()
    try:
        _, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        _, stderr = process.communicate()
        return Result(-9, stderr + "\n[timed out: killed]", None)
    ended = time.time()
    signalled = [float(line) for line in stamp.read_text().split()] if stamp.is_file() else []
    return Result(process.returncode, stderr, ended - signalled[0] if signalled else None)


def _start_signals(ignored: tuple[int, ...]) -> None:
    default_signals()
    for signum in ignored:
        signal.signal(signum, signal.SIG_IGN)


def raise_at(step: int, where: str) -> str:
    """The ``--trainer.callbacks+=`` argument adding a :class:`tests.callbacks.raise_at.RaiseAt`."""
    args = f'"step": {step}, "where": "{where}"'
    return f'--trainer.callbacks+={{"class_path": "tests.callbacks.raise_at.RaiseAt", "init_args": {{{args}}}}}'


def rows(folder: Path) -> list[tuple[int, bool]]:
    """The ``(step, is validation)`` of every ``metrics.csv`` row of the run, in file order."""
    with (folder / RUN / "metrics.csv").open() as file:
        return [(int(r["step"]), bool(r.get("val/map"))) for r in csv.DictReader(file)]


def final_state(folder: Path) -> dict[str, Any]:
    """What the run ends with: weights, optimiser state, sampler position, step, from its ``last.ckpt``."""
    checkpoint = torch.load(folder / RUN / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    (optimizer,) = checkpoint["optimizer_states"]
    return {
        "global_step": checkpoint["global_step"],
        "weights": checkpoint["state_dict"],
        "optimizer": optimizer["state"],
        "param_groups": optimizer["param_groups"],
        "samplers": checkpoint["callbacks"]["ResumableTraining"]["samplers"],
    }


def assert_same_run(actual: Path, expected: Path) -> None:
    """The resumed run ``actual`` ends as the uninterrupted ``expected``: its state and every row exactly once."""
    got, want = final_state(actual), final_state(expected)
    assert got["global_step"] == want["global_step"] == STEPS_PER_EPOCH * EPOCHS
    assert got["samplers"] == want["samplers"] and got["param_groups"] == want["param_groups"]
    torch.testing.assert_close(got["weights"], want["weights"], rtol=0, atol=1e-6)
    torch.testing.assert_close(got["optimizer"], want["optimizer"], rtol=0, atol=1e-6)
    assert sorted(rows(actual)) == sorted(rows(expected))  # every row once (no duplicate, none lost)


def assert_identical_run(actual: Path, expected: Path) -> None:
    """:func:`assert_same_run`, bit for bit: every weight and buffer, and every value of every ``metrics.csv`` row."""
    assert_same_run(actual, expected)
    got, want = final_state(actual)["weights"], final_state(expected)["weights"]
    assert [name for name in want if not torch.equal(got[name], want[name])] == []

    def values(folder: Path) -> list[tuple[tuple[str, str], ...]]:
        with (folder / RUN / "metrics.csv").open() as file:
            return sorted(tuple(sorted(row.items())) for row in csv.DictReader(file))

    assert values(actual) == values(expected)


def resume_step(folder: Path) -> int | None:
    """The global step of the checkpoint a ``--resume true`` of the run would continue from."""
    from ranklit.cli._runs import latest_checkpoint

    point = latest_checkpoint(folder / RUN / "checkpoints")
    return None if point.path is None else int(point.checkpoint["global_step"])


def folder_digest(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file of the run folder: its SHA-256 and modification time (nanoseconds)."""
    return {
        str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != "signal.txt"
    }
