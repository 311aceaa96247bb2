"""Issue 47, item 6: a run folder the process cannot write is refused before anything is written or trained.

A read-only ``checkpoints/`` used to be found at the first save, after a batch had trained and ``config.yaml`` and
``metrics.csv`` had been rewritten. Root writes into a 0o555 folder all the same (its ``CAP_DAC_OVERRIDE``), and the
tests run as root in some containers: there the resume runs under ``setpriv`` without that capability (and
``CAP_DAC_READ_SEARCH``), so that the permissions bind it as they bind a user; where neither is possible it is skipped.
A new run is checked in-process with ``os.access`` answering "no" for its experiment folder (any user)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ranklit.cli import _writable, main
from tests.cli.test_resume_cli import QUICK, REPOSITORY
from tests.ddp import default_signals, scaled_timeout

SHORT = [*QUICK, "--data.batch_sampler.init_args.batches_per_epoch=1", "--baseline_validation=false",
         "--trainer.limit_val_batches=1"]
RUN = Path("runs/quickstart/version_0")
UNPRIVILEGED = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]


def _without_root_override() -> list[str]:
    """The prefix that makes this process's permissions bind a ``ranklit`` subprocess (skip where none does)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None or subprocess.run([*UNPRIVILEGED, "true"], capture_output=True).returncode:
        pytest.skip("running as root without setpriv (or it may not drop capabilities here): chmod binds nothing")
    return UNPRIVILEGED


def _files() -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in sorted(RUN.rglob("*")) if path.is_file()}


def test_a_resume_into_a_read_only_checkpoints_folder_is_refused_first(tmp_path, monkeypatch) -> None:
    prefix = _without_root_override()
    monkeypatch.chdir(tmp_path)
    main([*SHORT, "--trainer.max_epochs=1"])  # a finished tiny run
    before, checkpoints = _files(), RUN / "checkpoints"
    checkpoints.chmod(0o555)
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(REPOSITORY), os.environ.get("PYTHONPATH", "")])}
    try:
        resumed = subprocess.run(
            [*prefix, sys.executable, "-m", "ranklit.cli", *SHORT, "--trainer.max_epochs=2", "--resume=true"],
            env=env, capture_output=True, text=True, timeout=scaled_timeout(300), preexec_fn=default_signals,
        )
    finally:
        checkpoints.chmod(0o755)
    assert resumed.returncode == 2, resumed.stderr[-3000:]
    line = resumed.stderr.strip().splitlines()[-1]
    assert line.startswith(f"error: {checkpoints} is not writable by this process (uid {os.geteuid()}): `ranklit fit` "
                           f"writes config.yaml, hparams.yaml, metrics.csv and run.lock into the run folder {RUN}")
    assert f"make it writable (`chmod u+w {checkpoints}`" in line and "Nothing was written or trained" in line
    assert "Restoring states" not in resumed.stderr  # refused before Lightning's fit began: no batch trained
    assert _files() == before  # config.yaml, hparams.yaml, metrics.csv, checkpoints byte-identical; no run.lock


def test_a_new_run_under_a_folder_it_cannot_write_is_refused_first(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    experiment = Path("runs/quickstart")
    experiment.mkdir(parents=True)
    access = os.access
    monkeypatch.setattr(_writable.os, "access", lambda path, mode: Path(path) != experiment and access(path, mode))
    with pytest.raises(SystemExit) as refused:
        main([*SHORT, "--trainer.max_epochs=1"])
    err = capsys.readouterr().err
    assert refused.value.code == 2, err[-3000:]
    assert err.strip().splitlines()[-1].startswith(
        f"error: {experiment} is not writable by this process (uid {os.geteuid()}), where the folder {RUN} is to be "
        "made: "
    )
    assert list(experiment.iterdir()) == []  # no run folder, no lock, no config.yaml
