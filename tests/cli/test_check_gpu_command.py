"""``ranklit check gpu``: the kernels and the device decoder against the torch/CPU path, a verdict table.

Without a GPU it runs through Triton's interpreter at tiny sizes (what a user's machine runs at full size)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("triton")

from ranklit.cli._check_gpu_command import main
from ranklit.functional import _kernel_checks
from ranklit.functional._kernels import _guard as _kernel_guard

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _fresh_guard() -> Iterator[None]:
    """Each check in a process of its own, as a user runs it (the guard remembers its checks per process)."""
    _kernel_guard.reset_kernel_checks()
    yield
    _kernel_guard.reset_kernel_checks()


def test_check_gpu_prints_a_verdict_for_every_kernel_and_the_decoder(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--sizes", "16", "--items", "100"])
    out = capsys.readouterr().out
    for row in ("self-check smooth-rank sums (SupAP bounds) | float64 | pass", "self-check metric counts | float32 |",
                "SupAPLoss | B=16 | pass", "SmoothAPLoss | B=16 | pass", "HAPLoss | B=16 | pass",
                "| metrics (kernel counts) | N=100 |", "| device decoder |"):
        assert row in out, (row, out)
    assert "Triton " in out.splitlines()[0] and out.rstrip().endswith("0 failed")


def test_a_failing_kernel_is_a_fail_row_with_its_error_and_exit_code_1(monkeypatch, capsys) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(_kernel_checks, "probe_rank_sums", broken)
    with pytest.raises(SystemExit) as stop:
        main(["--sizes", "8", "--items", "80"])
    assert stop.value.code == 1
    out = capsys.readouterr().out
    assert "| self-check smooth-rank sums (sigmoid steps) | float32 | FAIL | - | - | RuntimeError: CUDA error" in out
    assert "| SupAPLoss | B=8 | FAIL |" in out and "KernelError" in out  # forced in the check: it raises
    assert "14 checks: 11 failed (the torch path runs in their place)" in out


def test_check_gpu_is_a_ranklit_command() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "ranklit.cli", "check", "gpu", "--help"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "usage: ranklit check gpu" in run.stdout, run.stderr
    run = subprocess.run([sys.executable, "-m", "ranklit.cli", "check", "gpu", "--device", "cuda:7"], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=120)
    if "no CUDA device" in run.stderr:  # a machine without CUDA: one error line, exit 2
        assert run.returncode == 2
