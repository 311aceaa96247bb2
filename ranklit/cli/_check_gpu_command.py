"""``ranklit check gpu [--sizes B ...] [--items N] [--repeat R] [--device DEVICE]``: the kernels on this GPU.

Runs every Triton kernel and the device decoder against the torch/CPU path (:mod:`ranklit._gpu_check`) and prints a
verdict table to paste into a bug report. Exit code 0 when every check passes or is skipped, 1 when one fails (the
kernels that failed are the ones a run replaces by the torch path, with a warning). Without CUDA the kernels run in
Triton's interpreter at the small sizes given (it sets ``TRITON_INTERPRET=1`` before Triton is imported).
"""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["arguments", "main"]


def arguments() -> argparse.ArgumentParser:
    """The parser of `ranklit check gpu`."""
    parser = argparse.ArgumentParser(
        prog="ranklit check gpu",
        description="Check ranklit's Triton kernels and the device decoder against the torch/CPU path on this "
                    "machine, time both, print a verdict table (to paste into a bug report).",
    )
    parser.add_argument("--device", default=None, help="the device (default: cuda if available, else cpu)")
    parser.add_argument("--sizes", type=int, nargs="+", default=None,
                        help="loss batch sizes B (default: 1024 4096 16384 on CUDA, 32 on the CPU)")
    parser.add_argument("--items", type=int, default=None,
                        help="items N of the metrics check (default: 100000 on CUDA, 300 on the CPU)")
    parser.add_argument("--repeat", type=int, default=None, help="timed runs per row (default: 3 on CUDA, 1 on CPU)")
    return parser


def main(args: list[str]) -> None:
    """Parse ``args``, run the check, print the table; exit 1 when a check fails."""
    options = arguments().parse_args(args)
    import torch

    from ranklit.errors import UserError

    device = torch.device(options.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"--device {device}: no CUDA device is available here (drop --device to check on the CPU).")
    if device.type == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # read when Triton is imported, below
    gpu = device.type == "cuda"
    sizes = options.sizes or ([1024, 4096, 16384] if gpu else [32])
    items = options.items or (100_000 if gpu else 300)
    if min(sizes) < 8 or items < 80:
        raise UserError(f"--sizes must be at least 8 and --items at least 80, got {sizes} and {items}.")
    from ranklit._gpu_check import check_gpu, format_table

    rows = check_gpu(device, sizes, items, options.repeat or (3 if gpu else 1))
    sys.stdout.write(format_table(rows, device) + "\n")
    if any(row.verdict == "FAIL" for row in rows):
        sys.exit(1)
