"""The GPU benchmark runs as its dry run on the CPU (the command a GPU machine will run, at tiny sizes) and writes its
section into a results file, replacing an earlier one; the overhead benchmark's pieces run and time something."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.ddp import scaled_timeout

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_gpu_benchmark_dry_run_writes_every_table_naming_the_device(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    earlier = ("<!-- benchmarks/gpu.py: start -->\n## GPU (benchmarks/gpu.py)\n\nan earlier run's tables\n"
               "<!-- benchmarks/gpu.py: end -->\n\n## Later section\n\nkept\n")
    results.write_text("# Benchmark results\n\n## Losses\n\nearlier figures\n\n" + earlier)
    command = [sys.executable, "benchmarks/gpu.py", "--dry-run", "--results", str(results)]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=scaled_timeout(600))
    assert run.returncode == 0, run.stderr[-3000:]
    text = results.read_text()
    assert text.startswith("# Benchmark results\n\n## Losses\n\nearlier figures\n")  # the rest is kept
    assert text.endswith("## Later section\n\nkept\n") and "an earlier run's tables" not in text  # replaced
    assert text.count("## GPU (benchmarks/gpu.py)") == 1 and "Device: **CPU (" in text
    for title in ("### Metrics", "### Losses", "### Training step"):
        assert text.count(title) == 1
    section = text.split("## GPU (benchmarks/gpu.py)")[1]
    for row in ("bare product", "flat", "hierarchical (2 levels)", "torchmetrics `RetrievalMAP`",
                "| SupAPLoss | 32 | torch |", "| HAPLoss | 64 | torch |", "| SmoothAPLoss | 64 | torch |",
                "| HAPLoss | 64 | triton | not run", "| fp32 | NCHW |", "| bf16-mixed | channels-last |"):
        assert row in section, row
    timings = [line.split("|")[4:7] for line in section.splitlines() if line.startswith("| SupAPLoss | 32 | torch")]
    assert timings and all(float(cells[0]) > 0 and float(cells[2]) >= 0 for cells in timings)  # ms; floor (rounds to
    # 0.00 ms at the dry run's sizes on a CPU)


@pytest.mark.slow
def test_fit_throughput_dry_run_runs_ranklit_fit_both_ways_and_writes_its_table(tmp_path: Path) -> None:
    """The real ``ranklit fit`` twice (decoding in the workers, on the device), plain torchvision, the network alone;
    on the CPU the device path's pixels are the CPU path's (64 x 48 JPEGs: no reduced decoding)."""
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n## Losses\n\nearlier figures\n")
    command = [sys.executable, "benchmarks/fit_throughput.py", "--dry-run", "--sizes", "64x48", "--workers", "0",
               "--results", str(results)]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=scaled_timeout(900))
    assert run.returncode == 0, run.stderr[-3000:]
    text = results.read_text()
    assert text.startswith("# Benchmark results\n\n## Losses\n\nearlier figures\n")
    assert text.count("benchmarks/fit_throughput.py: start") == 1 and "Device: **CPU (" in text
    row = next(line for line in text.splitlines() if line.startswith("| 64 × 48 | 0 |"))
    cpu, on_device, plain, to_network, to_plain = (float(cell) for cell in row.split("|")[3:8])
    assert min(cpu, on_device, plain, to_network, to_plain) > 0
    assert to_plain == pytest.approx(max(cpu, on_device) / plain, rel=0.05)  # of the rounded rates
    assert "64x48: median 0.000, largest 0.000." in text  # bit-identical on the CPU


@pytest.mark.skipif(torch.cuda.is_available(), reason="with CUDA, the command runs the whole GPU benchmark")
def test_gpu_benchmark_without_cuda_and_without_dry_run_says_what_to_do() -> None:
    run = subprocess.run(
        [sys.executable, "benchmarks/gpu.py"], cwd=ROOT, capture_output=True, text=True, timeout=scaled_timeout(300)
    )
    assert run.returncode == 2 and "no CUDA device" in run.stderr and "--dry-run" in run.stderr


def test_overhead_benchmark_times_both_loops(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import overhead
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    bare = overhead.bare_train(steps=2, warmup=1)
    assert len(bare) == 2 and all(t > 0 for t in bare)
    embed, metric = overhead.bare_validate()
    assert embed > 0 and metric > 0


def test_startup_benchmark_dry_run_prints_every_fast_row_with_its_ratio() -> None:
    run = subprocess.run([sys.executable, "benchmarks/startup.py", "--dry-run"], cwd=ROOT, capture_output=True,
                         text=True, timeout=scaled_timeout(300))
    assert run.returncode == 0, run.stderr[-3000:]
    cells = [line.split("|") for line in run.stdout.splitlines() if line.startswith("| ")]
    rows = {cell[1].strip(): cell[2:4] for cell in cells}
    for name in ("import torch", "ranklit --help", "ranklit configs", "parse error (fit --nonsense 1)"):
        seconds, ratio = (float(cell) for cell in rows[name])
        assert seconds > 0 and ratio > 0, name
    assert float(rows["import torch"][1]) == 1.0 and "ranklit fit --help" not in rows  # the dry run skips Lightning


def test_dataloading_benchmark_prints_every_pipeline_and_the_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import dataloading
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    dataloading.main(["--sizes", "40x30", "--images", "64", "--per-class", "4", "--workers", "0", "--repeats", "2"])
    table = capsys.readouterr().out.split("\n\n")[-1].splitlines()
    assert "ranklit, decode first" in table[0] and table[0].endswith("| ranklit / plain |")
    cells = [float(cell) for cell in table[2].split("|")[3:-1]]
    assert table[2].startswith("| 40 x 30 | 0 |") and len(cells) == 6 and all(cell > 0 for cell in cells)
    assert "normalised in the main process" in table[0]
    assert cells[5] == pytest.approx(cells[0] / cells[3], rel=0.05)  # of the rounded rates


def test_metrics_split_dry_run_splits_every_configuration() -> None:
    run = subprocess.run([sys.executable, "metrics_split.py", "--dry-run"], cwd=ROOT / "benchmarks",
                         capture_output=True, text=True, timeout=scaled_timeout(300))
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [[cell.strip() for cell in line.split("|")[1:-1]] for line in run.stdout.splitlines()
            if line.startswith(("| flat", "| 2-level"))]
    assert [row[:2] for row in rows] == [["flat", "all 600"], ["flat", "100 vs 500"], ["2-level", "all 600"],
                                         ["2-level", "100 vs 500"]]
    for row in rows:
        product, total, ratio, counting = (float(cell) for cell in row[3:7])
        assert product >= 0 and total > 0 and ratio > 0 and 0 <= counting <= total
    assert float(rows[2][6]) > 0  # the 2-level path's counting was timed
    assert "| histogram (bincount, int32) |" in run.stdout


def test_loader_costs_benchmark_prints_every_step_and_the_bound(capsys: pytest.CaptureFixture[str]) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import loader_costs
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    loader_costs.main(["--size", "64x48", "--repeats", "1"])
    out = capsys.readouterr().out
    rows = [line.split("|") for line in out.splitlines() if line.startswith("| ") and "ms / item" not in line]
    assert len(rows) == 11 and all(float(row[2]) > 0 for row in rows), out
    assert "encode (bytes + box)" in out and "decode_on_device (bytes + boxes)" in out
    assert "torchvision (decode_rgb)" in out and "collation only, uint8" in out and "bound with a free crop" in out


_FAKE_PYTHON = """#!/usr/bin/env bash
echo "python $*" | tr '\\n' ' ' >> "$CALLS"; echo >> "$CALLS"
case "$*" in
  *"-m pytest"*) exit 3 ;;  # the CUDA tests fail
  *"-c "*) echo "ranklit 0 from x | torch 2 | triton 3 | cuda True"; echo "missing: none" ;;
esac
exit 0
"""


def test_gpu_session_runs_the_check_first_and_its_exit_status_reflects_every_step(tmp_path: Path) -> None:
    """A failing step in the middle fails the session (it reflected the last step only), the correctness check runs
    before any timing, at B = 4k and 16k, and the summary line gives each step's status."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python").write_text(_FAKE_PYTHON)
    (fake / "python").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "OUT": str(tmp_path / "out"),
           "CALLS": str(tmp_path / "calls")}
    run = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_session.sh")], env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert "check gpu --sizes 4096 16384" in calls[1]  # after the preflight, before the tests and the figures
    assert "-m pytest" in calls[2] and "benchmarks/gpu.py" in calls[3] and "fit_throughput.py" in calls[4]
    summary = (tmp_path / "out" / "summary.txt").read_text()
    assert summary.strip() == ("gpu_session summary: preflight: ok; check_gpu: ok; gpu_tests: FAILED (exit 3); "
                               "gpu_figures: ok; fit_throughput: ok")
