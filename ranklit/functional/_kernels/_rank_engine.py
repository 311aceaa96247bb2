"""Which engine computes the smooth-rank sums of SupAP, Smooth-AP and the H-AP surrogate: torch or Triton.

One contract, two engines ([spec §2][spec-engines]). The **torch** engine builds the ``[chunk, P, N]``
differences chunk of queries by chunk of queries (:func:`ranklit.functional.ranking.map_query_chunks`); the
**triton** engine (:mod:`ranklit.functional._kernels._rank_sums`) computes the same sums tile by tile in registers,
forward and
backward, and never writes the differences. ``engine="auto"`` (every loss's default) picks:

- ``"triton"`` when Triton imports, the scores are on a CUDA device and are float32 or float64, and the levels fit
  in ``int8`` (at most 127 label columns);
- ``"torch"`` otherwise: CPU tensors, a Triton older than 3.4 (PyTorch 2.2 to 2.7 ship 3.x without
  ``triton.knobs``, which the kernels read), float16/bfloat16 scores (the loss modules never produce them: their scores
  are float32 or float64), Triton missing (macOS, Windows, CPU-only wheels), more than 127 levels, and
  ``torch.use_deterministic_algorithms(True)`` (the kernels' gradient adds with atomics: bitwise run to run, only the
  torch engine repeats itself).

``engine="triton"`` forces the kernels and raises ``ValueError`` where they cannot run (Triton missing, float16 or
bfloat16 scores, too many levels, CPU tensors without Triton's interpreter); a loss module refuses it when it is
built on a machine where they never can (:func:`check_engine_runs`). With ``TRITON_INTERPRET=1`` set before
Triton is imported, the interpreter runs them on CPU tensors, slowly: what the CPU tests do. ``engine="torch"``
forces the torch engine. :func:`smooth_rank_engine` says which engine a call would use.

On first use in a process the kernels check themselves against torch on the device, and a kernel that fails there
or at a later launch hands that call and the rest of the process to torch, with one warning (``engine="triton"``:
an error instead): :mod:`ranklit.functional._kernels._rank_sums_check`.
"""

from __future__ import annotations

import functools
import importlib.util

import torch
from torch import Tensor

from ranklit._checks import check_choice
from ranklit.errors import UserError
from ranklit.functional._kernels import _guard as _kernel_guard

__all__ = ["ENGINES", "check_engine", "check_engine_runs", "smooth_rank_engine", "triton_available"]

ENGINES = ("auto", "torch", "triton")
_KERNEL_DTYPES = (torch.float32, torch.float64)
_MAX_LEVELS = 127  # levels travel to the kernels as int8, -1 marking the items outside a query's ranking


def check_engine(engine: str) -> str:
    """``engine`` if it is one of :data:`ENGINES`, else ``ValueError``.

    >>> check_engine("auto")
    'auto'
    """
    return check_choice("engine", engine, ENGINES, "'auto': Triton kernels on CUDA tensors when Triton imports")


def check_engine_runs(engine: str) -> str:
    """``engine`` checked when a loss is built: ``"triton"`` on a machine where the kernels cannot run at all (Triton
    does not import; no CUDA device and no interpreter) is refused now, before a run's baseline validation, not at
    its first training step. What depends on the tensors (their device and dtype) is still checked per call.

    >>> check_engine_runs("torch")
    'torch'
    """
    check_engine(engine)
    problem = None
    if engine == "triton" and not triton_available():
        problem = "triton does not import (it ships with PyTorch's Linux CUDA wheels)"
    elif engine == "triton" and not torch.cuda.is_available() and not _interpreting():
        problem = "this machine has no CUDA device, and the compiled kernels need one (or TRITON_INTERPRET=1)"
    if problem is not None:
        raise UserError(f"engine='triton' cannot run on this machine: {problem}; use engine='auto' (Triton on CUDA, "
                        "torch elsewhere) or 'torch'.")
    return engine


@functools.cache
def triton_available() -> bool:
    """Whether ``triton`` can be imported (it ships with PyTorch's Linux CUDA wheels)."""
    if importlib.util.find_spec("triton") is None:
        return False
    try:
        import triton  # noqa: F401
    except ImportError:  # an installed but broken triton: the torch engine runs
        return False
    return True


def smooth_rank_engine(scores: Tensor, engine: str = "auto", num_levels: int = 1) -> str:
    """The engine (``"torch"`` or ``"triton"``) that computes the smooth-rank sums of ``scores`` ``[Q, N]``.

    Args:
        scores: the ``[Q, N]`` scores a smooth-rank loss receives.
        engine: ``"auto"``, ``"torch"`` or ``"triton"`` (the losses' option of the same name).
        num_levels: ``L``, the number of label columns (H-AP; 1 for the binary losses).

    Raises ``ValueError`` when ``engine="triton"`` cannot run: Triton missing, float16/bfloat16 scores, more than 127
    levels.

    Example:
        >>> smooth_rank_engine(torch.zeros(2, 3)), smooth_rank_engine(torch.zeros(2, 3), "torch")
        ('torch', 'torch')
    """
    check_engine(engine)
    if engine == "torch":
        return "torch"
    if engine == "auto":  # CPU tensors: torch, without importing Triton
        on_gpu = scores.device.type == "cuda" and not torch.are_deterministic_algorithms_enabled()
        return "triton" if on_gpu and _kernel_problem(scores, num_levels) is None else "torch"
    problem = _kernel_problem(scores, num_levels)
    if problem is not None:
        raise UserError(f"engine='triton' cannot run here: {problem}; use engine='auto' or 'torch'.")
    return "triton"


def _kernel_problem(scores: Tensor, num_levels: int) -> str | None:
    """Why the Triton kernels cannot take these scores, or ``None``."""
    if not triton_available():
        return "triton does not import (it ships with PyTorch's Linux CUDA wheels)"
    too_old = _kernel_guard.triton_version_problem()
    if too_old is not None:
        return too_old
    if scores.dtype not in _KERNEL_DTYPES:
        return f"the kernels take float32 or float64 scores, got {scores.dtype} (cast them with `.float()`)"
    if num_levels > _MAX_LEVELS:
        return f"the kernels take at most {_MAX_LEVELS} levels, got {num_levels}"
    if scores.device.type != "cuda" and not _interpreting():
        return f"the scores are on {scores.device}, the compiled kernels need CUDA tensors (or TRITON_INTERPRET=1)"
    return None


def _interpreting() -> bool:
    """Whether Triton's kernels run in its interpreter (``TRITON_INTERPRET=1``)."""
    import triton

    return bool(triton.knobs.runtime.interpret)
