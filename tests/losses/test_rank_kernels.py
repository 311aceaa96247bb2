"""The Triton engine of SupAP, Smooth-AP and the H-AP surrogate against the torch engine: values and gradients.

Without a CUDA device the kernels run in Triton's interpreter on CPU tensors (``tests/conftest.py`` sets
``TRITON_INTERPRET=1`` before Triton is imported); on a CUDA machine they run compiled. The interpreter is slow, so
the problems are tiny (``Q = 5`` queries, ``N = 9`` items, up to 5 ranked items a query) and the blocks smaller still
(4 ranked items x 8 items), so that every tile edge is crossed and no size is a multiple of its block. In float64 the
engines agree to round-off; ``tests/test_gpu.py`` checks float32 on the device at the documented tolerance.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import Tensor

import ranklit.functional._kernels._rank_engine as engines
from ranklit.functional import SupAPOptions, hap_surrogate, smooth_ap_loss, smooth_rank_engine, supap_loss
from ranklit.functional._kernels import _rank_sums as rank_sums
from ranklit.losses import HAPPIERLoss, ROADMAPLoss, SmoothAPLoss
from tests.ddp import scaled_timeout
from tests.losses.cases import make_case


def _kernel_device() -> str | None:
    if not engines.triton_available():
        return None
    if torch.cuda.is_available():
        return "cuda"
    return "cpu" if engines._interpreting() else None


ROOT = Path(__file__).resolve().parents[2]
DEVICE = _kernel_device()
needs_kernels = pytest.mark.skipif(DEVICE is None, reason="needs Triton (compiled on CUDA, or TRITON_INTERPRET=1)")


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiles of 4 ranked items x 8 items: the tiny problems cross every tile edge."""
    monkeypatch.setattr(rank_sums, "_BLOCK_RANKED", 4)
    monkeypatch.setattr(rank_sums, "_BLOCK_ITEMS", 8)


def _problem(seed: int) -> SimpleNamespace:
    """5 queries x 9 items, float64, non-contiguous scores. Ranked items per query: 0 (no positive), 1, 5, 3, 4, so
    ``P = 5`` pads the rows; with blocks of 4 x 8, ``P`` and ``N`` are one past a block edge (an off-by-one in a
    loop bound drops an item). Items 2 (all queries) and 6 (query 3) are outside the ranking; the scores, rounded to
    1/8, tie, and two differ by 0.03 (inside ``delta``: the jump of ``H^-``)."""
    gen = torch.Generator().manual_seed(seed)
    scores = (torch.randn(9, 5, generator=gen, dtype=torch.float64) * 0.4).mul(8).round().div(8).T  # ties
    scores[:, 3] = scores[:, 7] + 0.03
    valid = torch.ones(5, 9, dtype=torch.bool)
    valid[:, 2] = valid[3, 6] = False
    levels = torch.zeros(5, 9, dtype=torch.long)
    for row, count in enumerate((0, 1, 5, 3, 4)):
        columns = valid[row].nonzero().squeeze(1)
        chosen = columns[torch.randperm(len(columns), generator=gen)[:count]]
        levels[row, chosen] = torch.randint(1, 3, (count,), generator=gen)
    levels[~valid] = torch.randint(0, 3, (int((~valid).sum()),), generator=gen)  # outside the ranking: any level
    return SimpleNamespace(scores=scores, levels=levels, valid=valid, weights=torch.rand(5, generator=gen))


LOSSES: dict[str, Callable[..., Tensor]] = {
    "smooth_ap": lambda p, s, e: smooth_ap_loss(s, p.levels > 0, p.valid, tau=0.05, reducer="none", engine=e),
    "supap": lambda p, s, e: supap_loss(s, p.levels > 0, p.valid, tau=0.05, reducer="none", engine=e),
    "supap_released": lambda p, s, e: supap_loss(
        s, p.levels > 0, p.valid, tau=0.05, delta=0.1, rho=3.0, offset=1.44, start=0.0, reducer="none", engine=e
    ),
    "hap": lambda p, s, e: hap_surrogate(s, p.levels, 2, p.valid, tau=0.05, delta=0.1, rho=3.0, engine=e)[0],
    "hap_no_hrank": lambda p, s, e: hap_surrogate(s, p.levels, 2, p.valid, with_hrank=False, engine=e)[0],
    "hap_alpha_3_levels": lambda p, s, e: hap_surrogate(
        s, p.levels + (p.levels > 1).long(), 3, p.valid, alpha=3.0, leak=2.0, beta=4.0, gamma=0.25, engine=e
    )[0],
}


def _value_and_grad(fn: Callable[..., Tensor], problem: SimpleNamespace, engine: str) -> tuple[Tensor, Tensor]:
    scores = problem.scores.detach().to(DEVICE).requires_grad_()
    moved = SimpleNamespace(**{k: v.to(DEVICE) for k, v in vars(problem).items()})
    values = fn(moved, scores, engine)
    (grad,) = torch.autograd.grad((values * moved.weights).sum(), scores)
    return values.detach().cpu(), grad.cpu()


@needs_kernels
@pytest.mark.usefixtures("small_blocks")
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_kernels_give_the_torch_engines_values_and_gradients(name: str) -> None:
    problem = _problem(seed=len(name))
    want, want_grad = _value_and_grad(LOSSES[name], problem, "torch")
    got, got_grad = _value_and_grad(LOSSES[name], problem, "triton")
    assert want_grad.abs().sum() > 0
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(got_grad, want_grad, rtol=1e-9, atol=1e-10)


MODULES: dict[str, Callable[[str], torch.nn.Module]] = {  # ROADMAPLoss holds a SupAPLoss, HAPPIERLoss is a HAPLoss
    "SmoothAPLoss": lambda e: SmoothAPLoss(tau=0.1, reducer="class_balanced", engine=e),
    "ROADMAPLoss": lambda e: ROADMAPLoss(tau=0.1, reducer="active", include_self=True, engine=e),
    "HAPPIERLoss": lambda e: HAPPIERLoss(10, 3, tau=0.1, engine=e),  # "mean"; the functional cases: "none"
}


@needs_kernels
@pytest.mark.parametrize(("name", "case"), [("SmoothAPLoss", "refs"), ("ROADMAPLoss", "flat"),
                                            ("HAPPIERLoss", "hierarchical")])
def test_loss_modules_give_the_same_values_and_gradients_on_both_engines(name: str, case: str) -> None:
    """Through the modules: ids/ref_ids, multi-level labels, the query kept in its ranking, the reducers."""
    results = []
    for engine in ("torch", "triton"):
        args, kwargs = make_case(case, seed=3, batch=9, dim=3)
        args = {k: v.detach().to(DEVICE).requires_grad_(v.requires_grad) for k, v in args.items()}
        kwargs = {k: v.detach().to(DEVICE).requires_grad_(v.requires_grad) for k, v in kwargs.items()}
        torch.manual_seed(0)  # HAPPIERLoss's proxies
        loss = MODULES[name](engine).to(device=DEVICE, dtype=torch.float64)(**args, **kwargs)
        leaves = [args["embeddings"]] + ([kwargs["ref_embeddings"]] if kwargs else [])
        results.append((loss.detach(), torch.autograd.grad(loss.sum(), leaves)))
    (want, want_grads), (got, got_grads) = results
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    for g, w in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-10)


@needs_kernels
def test_float32_kernels_agree_within_the_documented_tolerance() -> None:
    problem = _problem(seed=0)
    problem.scores = problem.scores.float() + 1e-3 * torch.randn(5, 9)  # no ties: float32 is the only difference
    problem.weights = problem.weights.float()
    want, want_grad = _value_and_grad(LOSSES["hap"], problem, "torch")
    got, got_grad = _value_and_grad(LOSSES["hap"], problem, "triton")
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(got_grad, want_grad, rtol=0, atol=1e-4 * float(want_grad.abs().max()))


def test_the_engine_is_told_and_a_forced_one_that_cannot_run_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu, cuda = torch.zeros(2, 3), SimpleNamespace(device=torch.device("cuda"), dtype=torch.float32)
    assert smooth_rank_engine(cpu) == "torch"  # CPU tensors: torch, even under the interpreter
    assert smooth_rank_engine(cuda, "torch") == "torch"
    monkeypatch.setattr(engines, "triton_available", lambda: True)
    # an earlier test's Trainer(deterministic=True) leaves the global switch on (it takes the torch engine: below)
    torch.use_deterministic_algorithms(False)
    assert smooth_rank_engine(cuda) == "triton"
    assert smooth_rank_engine(SimpleNamespace(device=cuda.device, dtype=torch.bfloat16)) == "torch"  # visible fallback
    assert smooth_rank_engine(cuda, num_levels=128) == "torch"
    torch.use_deterministic_algorithms(True)
    try:  # the kernels' atomic additions are not bitwise repeatable
        assert smooth_rank_engine(cuda) == "torch" and smooth_rank_engine(cuda, "triton") == "triton"
    finally:
        torch.use_deterministic_algorithms(False)
    with pytest.raises(ValueError, match=r"float32 or float64 scores, got torch\.float16"):
        smooth_rank_engine(cpu.half(), "triton")
    with pytest.raises(ValueError, match="at most 127 levels"):
        smooth_rank_engine(cuda, "triton", num_levels=200)
    monkeypatch.setattr(engines, "triton_available", lambda: False)  # macOS, Windows, CPU-only wheels
    assert smooth_rank_engine(cuda) == "torch"
    with pytest.raises(ValueError, match="triton does not import"):
        smooth_rank_engine(cuda, "triton")
    with pytest.raises(ValueError, match="`engine` must be one of"):
        SupAPOptions(engine="cuda")
    with pytest.raises(ValueError, match="`engine` must be one of"):
        SmoothAPLoss(engine="gpu")


def test_compiled_kernels_refuse_cpu_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engines, "triton_available", lambda: True)
    monkeypatch.setattr(engines, "_interpreting", lambda: False)
    with pytest.raises(ValueError, match="need CUDA tensors"):
        smooth_rank_engine(torch.zeros(2, 3), "triton")


_COMPILE = """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from ranklit.functional._kernels._rank_sum_kernels import rank_sum_kernels

kernels = rank_sum_kernels()
pointers = {"forward": ["s", "code", "w", "idx", "par", "rank", "hrank"],
            "backward": ["s", "code", "w", "idx", "par", "g_rank", "g_hrank", "grad", "rows"]}
for name, names in pointers.items():
    signature = {f"{n}_ptr": "*i8" if n == "code" else "*i32" if n == "idx" else "*fp32" for n in names}
    flags = ["STEPS", "WITH_HRANK", "HAS_WEIGHTS", "BP", "BN"]
    signature |= {"N": "i32", "P": "i32"} | dict.fromkeys(flags, "constexpr")
    for constants in ({"STEPS": 0, "WITH_HRANK": False, "HAS_WEIGHTS": False},
                      {"STEPS": 1, "WITH_HRANK": True, "HAS_WEIGHTS": True}):
        constants |= {"BP": 16, "BN": 128}
        where = {(list(signature).index(key),): value for key, value in constants.items()}
        triton.compile(ASTSource(getattr(kernels, name), signature, where), target=GPUTarget("cuda", 90, 32))
print("compiled")
"""


@pytest.mark.slow
@pytest.mark.skipif(not engines.triton_available(), reason="needs Triton")
def test_the_kernels_compile_for_an_sm90_gpu_without_one() -> None:
    """The interpreter runs the kernels as Python; this compiles them (to the GPU's machine code, as on an H100 or
    H200), which catches what only the compiler refuses (types, constexpr use) on a machine without a GPU."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", _COMPILE], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=scaled_timeout(600))
    assert run.returncode == 0 and "compiled" in run.stdout, run.stderr[-3000:]
