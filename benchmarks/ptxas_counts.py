"""Registers and spills of every Triton kernel of ranklit, per GPU architecture, compiled ahead of time on the CPU.

No GPU needed: Triton compiles each kernel to PTX for the target, and its bundled ``ptxas -v`` reports what the
machine code uses (registers per thread, bytes of spill stores and loads). Prints one Markdown table (for
``benchmarks/RESULTS.md``); ``--quick`` compiles one architecture and the shipped configurations only (the test).

Usage::

    python benchmarks/ptxas_counts.py                 # sm_70 .. sm_90, the shipped and the alternative configurations
    python benchmarks/ptxas_counts.py --arch 80 90 --quick
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)  # compile, do not interpret

ARCHS = (70, 75, 80, 86, 89, 90)


def ptxas_usage(ptx: str, arch: int) -> tuple[int, int]:
    """``(registers, spill bytes)`` ptxas reports for ``ptx`` on ``sm_<arch>``."""
    import triton

    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "kernel.ptx"
        source.write_text(ptx)
        name = f"sm_{arch}a" if arch >= 90 else f"sm_{arch}"  # Triton targets Hopper's sm_90a
        run = subprocess.run([str(ptxas), "-v", f"--gpu-name={name}", str(source), "-o", str(source) + ".o"],
                             capture_output=True, text=True, check=True)
    registers = int(re.search(r"Used (\d+) registers", run.stderr).group(1))  # type: ignore[union-attr]
    spills = sum(int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", run.stderr))
    return registers, spills


def _compile(fn, signature: dict[str, str], constants: dict, arch: int, warps: int) -> str:  # type: ignore[no-untyped-def]
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    types = {**signature, **dict.fromkeys(constants, "constexpr")}
    source = ASTSource(fn=fn, signature=types, constexprs=constants)
    return str(triton.compile(source, target=GPUTarget("cuda", arch, 32), options={"num_warps": warps}).asm["ptx"])


def rank_sum_rows(arch: int, quick: bool) -> list[str]:
    """The smooth-rank sums' kernels: forward and backward, float32 and float64, the H-AP variant (the largest)."""
    import torch

    from ranklit.functional._kernels import _rank_sums
    from ranklit.functional._kernels._rank_sum_kernels import rank_sum_kernels

    kernels, rows = rank_sum_kernels(), []
    pointers = {"forward": ["s", "code", "w", "idx", "par", "rank", "hrank"],
                "backward": ["s", "code", "w", "idx", "par", "g_rank", "g_hrank", "grad", "rows"]}
    for dtype in ("fp32", "fp64"):
        for name, names in pointers.items():
            signature = {f"{n}_ptr": "*i8" if n == "code" else "*i32" if n == "idx" else f"*{dtype}" for n in names}
            signature |= {"N": "i32", "P": "i32"}
            shipped = (_rank_sums._BLOCK_RANKED, _rank_sums._BLOCK_ITEMS,
                       _rank_sums.num_warps(torch.float64 if dtype == "fp64" else torch.float32))
            configs = [shipped] if quick else sorted({shipped, (16, 128, 4), (16, 64, 4), (8, 128, 4), (16, 128, 8)})
            for bp, bn, warps in configs:
                constants = {"STEPS": 1, "WITH_HRANK": True, "HAS_WEIGHTS": True, "BP": bp, "BN": bn}
                registers, spills = ptxas_usage(_compile(getattr(kernels, name), signature, constants, arch, warps),
                                                arch)
                mark = " (shipped)" if (bp, bn, warps) == shipped else ""
                rows.append(f"| sm_{arch} | rank sums {name} {dtype} | BP={bp} BN={bn} warps={warps}{mark} | "
                            f"{registers} | {spills} |")
    return rows


def metric_rows(arch: int, quick: bool) -> list[str]:
    """The metrics' counting kernel, its three modes (ids, junk and the strict pass: the largest variant)."""
    import torch

    from ranklit.functional._kernels import _triton_counts as t

    signature = {
        **dict.fromkeys(("query_ptr", "ref_ptr", "threshold_ptr"), "*fp32"),
        **dict.fromkeys(("query_id_ptr", "ref_id_ptr", "start_ptr", "count_ptr", "tiles_ptr"), "*i64"),
        "junk_ptr": "*u8",
        **dict.fromkeys(("num_queries", "num_refs", "dim", "log_width", "hist_width", "stride_query", "stride_ref",
                         "stride_junk", "stride_threshold", "stride_out"), "i32"),
    }
    shipped = t.launch_config_for(arch)
    rows = []
    for mode, pointer in ((0, "*fp32"), (1, "*fp32"), (2, "*i32")):
        for block_k, warps in [shipped] if quick else sorted({shipped, (32, 4), (32, 8)}):
            constants = {"MODE": mode, "HAS_IDS": 1, "HAS_JUNK": 1, "STRICT": 1, "BLOCK_M": t.BLOCK_M,
                         "BLOCK_N": t.BLOCK_N, "BLOCK_K": block_k}
            ptx = _compile(t.metric_counts_kernel(torch.device("cuda")), {**signature, "out_ptr": pointer},
                           constants, arch, warps)
            registers, spills = ptxas_usage(ptx, arch)
            mark = " (shipped)" if (block_k, warps) == shipped else ""
            rows.append(f"| sm_{arch} | metric counts mode {mode} | M={t.BLOCK_M} N={t.BLOCK_N} K={block_k} "
                        f"warps={warps}{mark} | {registers} | {spills} |")
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", type=int, nargs="+", default=list(ARCHS), help="compute capabilities (70 .. 90)")
    parser.add_argument("--quick", action="store_true", help="the shipped configurations only")
    args = parser.parse_args(argv)
    print("| GPU | kernel | configuration | registers | spill bytes (stores + loads) |")
    print("|---|---|---|---|---|")
    for arch in args.arch:
        for row in rank_sum_rows(arch, args.quick) + metric_rows(arch, args.quick):
            print(row, flush=True)


if __name__ == "__main__":
    main()
