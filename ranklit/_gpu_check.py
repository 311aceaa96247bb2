"""``ranklit check gpu``: every kernel and the device decoder against the torch/CPU path on this machine's GPU.

For a bug report, or the first run on a new GPU: one table, one row per check, each with its verdict (``pass``,
``FAIL`` with the error, ``skip`` with the reason) and, where both engines run, their times (median of ``repeat``
runs after a warm-up, synchronised):

1. the kernels' **self-checks** (:mod:`ranklit.functional._kernels._guard`): each variant of the smooth-rank sums in
   float32 and float64, and the metrics' counting kernel, on their probe problems;
2. the **losses** (SupAP, Smooth-AP, H-AP), forward and backward at each batch size ``B`` (``d = 128``, P x 4
   batches; H-AP with 4 coarse classes of 4 fine ones), ``engine="triton"`` against ``engine="torch"``: the loss
   at ``rtol 1e-4``, the gradient within ``1e-4 * max |grad|`` (the documented tolerances);
3. the **metrics** of ``N`` items against each other (``d = 128``, classes of 40), the kernel's counts against the
   torch path's on the same device (``RANKLIT_METRICS_KERNEL=0``) within ``1e-5`` (near-ties of float32 scores may
   order differently: module docstring of :mod:`ranklit.functional.metrics._kernel_counts`);
4. the **device decoder** (:func:`ranklit.data.images._device_decode.device_decoder`): found or not, and 64 JPEGs of
   640 x 480 decoded on the device and on the CPU.

On the CPU the kernels run in Triton's interpreter (the command sets ``TRITON_INTERPRET=1``), so the sizes must be
tiny (the test runs ``--sizes 32 --items 300``); the sized metrics row needs CUDA tensors and says so.
"""

from __future__ import annotations

import functools
import io
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

__all__ = ["Row", "check_gpu", "format_table"]


@dataclass(frozen=True)
class Row:
    """One check: its name, size, verdict (``pass``/``FAIL``/``skip``), times in ms (``None``: not run), detail."""

    check: str
    size: str
    verdict: str
    torch_ms: float | None = None
    kernel_ms: float | None = None
    detail: str = ""


def _timed(fn: Callable[[], object], device: torch.device, repeat: int) -> float:
    fn()  # warm-up (compilation)
    times = []
    for _ in range(repeat):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(1000 * (time.perf_counter() - start))
    return statistics.median(times)


def _error(error: BaseException) -> str:
    lines = [line for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[-1] if lines else ''}"[:200]


def _self_checks(device: torch.device) -> list[Row]:
    import warnings

    from ranklit.functional import KernelFallbackWarning, check_kernels

    results = []
    with warnings.catch_warnings():  # a failure is its row: no warning on top
        warnings.simplefilter("ignore", KernelFallbackWarning)
        for dtype in (torch.float32, torch.float64):
            results += check_kernels(device, dtype, metrics=dtype == torch.float32, on_cpu=True)
    return [Row(f"self-check {r.kernel}", str(r.dtype).removeprefix("torch."), "pass" if r.passed else "FAIL",
                detail=f"{r.seconds:.2f} s" if r.passed else r.error.split(": ", 1)[-1][:300]) for r in results]


def _loss_step(loss_fn: torch.nn.Module, embeddings: torch.Tensor, labels: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """One forward and backward: the loss and the embeddings' gradient."""
    leaf = embeddings.detach().clone().requires_grad_()
    loss = loss_fn(leaf, labels)
    (grad,) = torch.autograd.grad(loss, leaf)
    return loss.detach(), grad


def _loss_rows(device: torch.device, sizes: list[int], repeat: int) -> list[Row]:
    from ranklit.losses import HAPLoss, SmoothAPLoss, SupAPLoss

    makers = {"SupAPLoss": SupAPLoss, "SmoothAPLoss": SmoothAPLoss, "HAPLoss": HAPLoss}
    rows = []
    for size in sizes:
        generator = torch.Generator().manual_seed(size)
        embeddings = torch.randn(size, 128, generator=generator).to(device)
        fine = torch.arange(size, device=device) // 4
        for name, make in makers.items():
            labels = torch.stack([fine, fine // 4], 1) if name == "HAPLoss" else fine
            results: list[tuple[torch.Tensor, torch.Tensor]] = []
            times: list[float] = []
            try:
                for engine in ("torch", "triton"):
                    step = functools.partial(_loss_step, make(engine=engine), embeddings, labels)
                    results.append(step())
                    times.append(_timed(step, device, repeat))
            except Exception as error:  # a forced kernel that fails: KernelError
                torch_ms = times[0] if times else None
                rows.append(Row(name, f"B={size}", "FAIL", torch_ms, None, _error(error)))
                continue
            (want, want_grad), (got, got_grad) = results
            loss_error = float((got - want).abs() / want.abs().clamp(min=1e-12))
            grad_error = float((got_grad - want_grad).abs().max() / want_grad.abs().max().clamp(min=1e-30))
            verdict = "pass" if loss_error <= 1e-4 and grad_error <= 1e-4 else "FAIL"
            rows.append(Row(name, f"B={size}", verdict, times[0], times[1],
                            f"loss rel. diff {loss_error:.1e}, grad {grad_error:.1e} of max"))
    return rows


_SWITCH = "RANKLIT_METRICS_KERNEL"  # "0": the metrics count with the torch path on CUDA (docs/gpu.md)


def _metric_row(device: torch.device, items: int, repeat: int) -> Row:
    from ranklit.functional import retrieval_metrics

    size = f"N={items}"
    if device.type != "cuda":
        return Row("metrics (kernel counts)", size, "skip", detail="the kernel path is for CUDA tensors (its "
                   "self-check above ran through the interpreter)")
    generator = torch.Generator().manual_seed(0)
    embeddings = torch.randn(items, 128, generator=generator).to(device)
    labels = (torch.arange(items) // 40).to(device)
    saved = os.environ.get(_SWITCH)
    results, times = [], []
    try:
        for switch in ("0", "1"):  # the torch path, then the kernel's
            os.environ[_SWITCH] = switch
            results.append(retrieval_metrics(embeddings, labels))
            times.append(_timed(lambda: retrieval_metrics(embeddings, labels), device, repeat))
    except Exception as error:  # the verdict says why
        return Row("metrics (kernel counts)", size, "FAIL", detail=_error(error))
    finally:
        if saved is None:
            os.environ.pop(_SWITCH, None)
        else:
            os.environ[_SWITCH] = saved
    difference = max(abs(float(results[1][key]) - float(value)) for key, value in results[0].items())
    verdict = "pass" if difference <= 1e-5 else "FAIL"
    return Row("metrics (kernel counts)", size, verdict, times[0], times[1], f"largest metric diff {difference:.1e}")


def _decoder_row(device: torch.device, repeat: int) -> Row:
    from PIL import Image

    from ranklit.data import device_decoder

    decoder, cpu = device_decoder(device), device_decoder(torch.device("cpu"))
    if decoder is None:
        return Row("device decoder", "64 x 640x480", "skip" if device.type == "cpu" else "FAIL",
                   detail="no decoder decodes the probe JPEGs on this device as Pillow does: the CPU path decodes")
    buffer = io.BytesIO()
    pixels = torch.randint(0, 256, (480, 640, 3), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)
    Image.fromarray(pixels.numpy()).save(buffer, format="JPEG", quality=90)
    data = [torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)] * 64
    kernel_ms = _timed(lambda: decoder(data, device), device, repeat)
    torch_ms = _timed(lambda: cpu(data, torch.device("cpu")), torch.device("cpu"), repeat) if cpu else None
    return Row("device decoder", "64 x 640x480", "pass", torch_ms, kernel_ms,
               "probe JPEGs as Pillow's within PROBE_TOLERANCE; 'torch' column: the CPU decoder")


def check_gpu(device: torch.device, sizes: list[int], items: int, repeat: int) -> list[Row]:
    """Every row of the check on ``device`` (module docstring)."""
    rows = _self_checks(device) + _loss_rows(device, sizes, repeat) + [_metric_row(device, items, repeat)]
    return [*rows, _decoder_row(device, repeat)]


def format_table(rows: list[Row], device: torch.device) -> str:
    """The verdict table and the versions, as Markdown (to paste into a bug report)."""
    import triton

    import ranklit

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU (Triton's interpreter)"
    lines = [f"ranklit {ranklit.__version__}, torch {torch.__version__}, Triton {triton.__version__}, {name}", "",
             "| check | size | verdict | torch ms | kernel ms | detail |", "|---|---|---|---:|---:|---|"]
    for row in rows:
        times = [f"{t:.1f}" if t is not None else "-" for t in (row.torch_ms, row.kernel_ms)]
        lines.append(f"| {row.check} | {row.size} | {row.verdict} | {times[0]} | {times[1]} | {row.detail} |")
    failed = sum(row.verdict == "FAIL" for row in rows)
    lines += ["", f"{len(rows)} checks: {failed} failed" + (" (the torch path runs in their place)" if failed else "")]
    return "\n".join(lines)
