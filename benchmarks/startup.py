"""How long the ``ranklit`` command takes to answer, against ``python -c "import torch"`` (issue 31).

Usage::

    python benchmarks/startup.py                    # 5 rounds (about 2 minutes on 2 cores)
    python benchmarks/startup.py --tree /path/to/other/checkout   # the same table for another source tree (before)
    python benchmarks/startup.py --dry-run          # one round, without the two rows that import Lightning

Each row is a fresh process (``python -m ranklit.cli ...``, as the console script runs it) with ``PYTHONPATH`` set to
``--tree`` (default: this repository), run from an empty temporary folder; rounds run every row once, in turn, so a
load change on a shared machine hits all rows. The table gives each row's median wall-clock time over the rounds and
its ratio to the median of ``import torch``. ``fit, 1 step`` is the quick start (``ranklit fit --config
quickstart.yaml --trainer.max_steps 1``) from start to exit: the baseline validation, the first training step, the
checkpoint; ``fit --help`` builds the LightningCLI parser.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "ranklit.cli"]
ROWS = {  # name -> (command, needs Lightning, exit code)
    "import torch": ([sys.executable, "-c", "import torch"], False, 0),
    "ranklit --help": ([*CLI, "--help"], False, 0),
    "ranklit configs": ([*CLI, "configs"], False, 0),
    "unknown command (ranklit fti)": ([*CLI, "fti"], False, 2),
    "parse error (fit --nonsense 1)": ([*CLI, "fit", "--config", "quickstart.yaml", "--nonsense", "1"], False, 2),
    "ranklit data prepare --help": ([*CLI, "data", "prepare", "--help"], False, 0),
    "ranklit search --help": ([*CLI, "search", "--help"], False, 0),
    "ranklit fit --help": ([*CLI, "fit", "--help"], True, 0),
    "fit, 1 step (start to exit)": ([*CLI, "fit", "--config", "quickstart.yaml", "--trainer.max_steps", "1"], True, 0),
}


def time_once(command: list[str], tree: Path, code: int) -> float:
    """Seconds from the start of ``command`` to its exit, run from an empty folder with ``tree`` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(tree), "WANDB_MODE": "offline"}
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        run = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=600)
        seconds = time.perf_counter() - start
    if run.returncode != code:
        raise SystemExit(f"{' '.join(command[2:])} failed ({run.returncode}):\n{run.stderr[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="runs of every row (the median is reported)")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the source tree whose ranklit is timed")
    parser.add_argument("--dry-run", action="store_true", help="one round, without the rows that import Lightning")
    options = parser.parse_args()
    rows = {name: (command, code) for name, (command, heavy, code) in ROWS.items() if not (options.dry_run and heavy)}
    times: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(1 if options.dry_run else options.rounds):
        for name, (command, code) in rows.items():
            times[name].append(time_once(command, options.tree.resolve(), code))
    torch_time = statistics.median(times["import torch"])
    commit = subprocess.run(["git", "-C", str(options.tree), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "not a git tree"
    machine = f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()})"
    print(f"Tree: {options.tree.resolve()} ({commit}); Python {platform.python_version()}, torch {torch.__version__}, "
          f"{machine}; medians of {len(times['import torch'])} rounds\n")
    print("| command | median (s) | × import torch |\n|---|---:|---:|")
    for name, seconds in times.items():
        median = statistics.median(seconds)
        print(f"| {name} | {median:.2f} | {median / torch_time:.2f} |")


if __name__ == "__main__":
    main()
