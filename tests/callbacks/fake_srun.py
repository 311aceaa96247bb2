"""``python fake_srun.py N COMMAND...``: what ``srun --ntasks-per-node N`` does on one node, for the SLURM fault cases.

Starts ``N`` copies of ``COMMAND`` with the SLURM variables of one job step (``SLURM_PROCID``, ``SLURM_LOCALID``,
``SLURM_NTASKS``, ``SLURM_NTASKS_PER_NODE``, …; ``SLURM_JOB_ID`` and ``MASTER_PORT`` from the environment), in its
own process group: a signal to the group reaches every task, and the launcher itself ignores ``SIGTERM``,
``SIGINT`` and ``SIGUSR1`` (``srun`` forwards them; here the tasks receive them directly). Exits with the largest
exit code of the tasks, as ``srun`` reports a failed step.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)


def _default_signals() -> None:
    for signum in _FORWARDED:  # an ignored signal stays ignored across exec
        signal.signal(signum, signal.SIG_DFL)


def main() -> None:
    tasks, command = int(sys.argv[1]), sys.argv[2:]
    for signum in _FORWARDED:
        signal.signal(signum, signal.SIG_IGN)
    step = {"SLURM_NTASKS": str(tasks), "SLURM_NTASKS_PER_NODE": str(tasks), "SLURM_NNODES": "1",
            "SLURM_NODEID": "0", "SLURM_NODELIST": "127.0.0.1", "MASTER_ADDR": "127.0.0.1"}
    children = [
        subprocess.Popen(
            command,
            env=os.environ | step | {"SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank)},
            preexec_fn=_default_signals,
        )
        for rank in range(tasks)
    ]
    codes = [child.wait() for child in children]
    sys.exit(max(code if code >= 0 else 128 - code for code in codes))


if __name__ == "__main__":
    main()
