"""The kernels cannot break a run (issue 46): the first-use self-check, the fallback at first use and mid-run, the
forced mode, the check at a run's set-up, the Triton version gate and the launch on the tensor's device.

Without a GPU the kernels run in Triton's interpreter (``tests/conftest.py``); failures are injected by wrapping the
real kernels: a compile error, a wrong result, a CUDA error at a later launch. Every run must finish with the torch
path's numbers and exactly one warning naming the kernel, the device, the Triton version and the error.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn

triton = pytest.importorskip("triton")

from ranklit.functional._kernels import _guard as _kernel_guard  # noqa: E402
from ranklit.functional._kernels import _rank_engine as engines  # noqa: E402
from ranklit.functional._kernels import _rank_sums, _triton_counts  # noqa: E402
from ranklit.functional._kernels._guard import KernelError, KernelFallbackWarning, kernel_state  # noqa: E402
from ranklit.functional.losses import _smooth_rank  # noqa: E402
from ranklit.functional.metrics import _kernel_counts  # noqa: E402
from ranklit.functional.metrics._kernel_check import METRICS_KERNEL  # noqa: E402
from ranklit.functional.metrics._retrieval import retrieval_metric_tensors  # noqa: E402
from ranklit.losses import SupAPLoss  # noqa: E402

pytestmark = pytest.mark.skipif(not engines._interpreting() and not torch.cuda.is_available(),
                                reason="needs Triton's interpreter (TRITON_INTERPRET=1) or a GPU")
CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def _fresh_guard() -> Iterator[None]:
    _kernel_guard.reset_kernel_checks()
    yield
    _kernel_guard.reset_kernel_checks()


class CompilationError(Exception):
    """What Triton raises when a kernel does not compile (its own class needs source positions to be built)."""


class _Faulty:
    """The real kernel, with a failure injected: ``mode`` "compile" (every launch raises), "wrong" (the output
    tensor ``args[out]`` shifted after the real launch) or "cuda" (launches from number ``after`` on raise)."""

    def __init__(self, real: Any, mode: str, counter: list[int], *, after: int = 0, out: int = 0) -> None:
        self.real, self.mode, self.counter, self.after, self.out = real, mode, counter, after, out

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        def launch(*args: Any, **kwargs: Any) -> None:
            self.counter[0] += 1
            if self.mode == "compile":
                raise CompilationError("at 12:8:\n    d = s_j[None, :] - s_k[:, None]\n        ^\nincompatible types")
            if self.mode == "cuda" and self.counter[0] > self.after:
                raise RuntimeError("CUDA error: an illegal memory access was encountered")
            self.real[grid](*args, **kwargs)
            if self.mode == "wrong":
                args[self.out].add_(1)

        return launch


def _inject_rank_kernels(monkeypatch: pytest.MonkeyPatch, mode: str, **options: int) -> list[int]:
    real, counter = _rank_sums.rank_sum_kernels(), [0]
    fake = SimpleNamespace(forward=_Faulty(real.forward, mode, counter, out=5, **options),
                           backward=_Faulty(real.backward, mode, counter, out=7, **options))
    monkeypatch.setattr(_rank_sums, "rank_sum_kernels", lambda: fake)
    return counter


def _train(engine: str, steps: int = 3) -> tuple[list[float], torch.Tensor]:
    """A plain loop: a linear layer on fixed inputs trained by SupAP (float64: the engines agree to round-off)."""
    torch.manual_seed(0)
    net = nn.Linear(8, 8).double()
    inputs, labels = torch.randn(24, 8, dtype=torch.float64), torch.arange(24) // 4
    loss_fn, optimizer = SupAPLoss(engine=engine), torch.optim.SGD(net.parameters(), lr=0.5)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_fn(net(inputs), labels)
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    return losses, net.weight.detach().clone()


def _auto_picks_the_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """``engine="auto"`` on CPU tensors as on CUDA ones: the kernels (here through the interpreter)."""
    real = _smooth_rank.smooth_rank_engine
    monkeypatch.setattr(_smooth_rank, "smooth_rank_engine",
                        lambda scores, engine="auto", levels=1: "triton" if engine == "auto" else real(scores, engine))


def _one_fallback_warning(caught: list[warnings.WarningMessage], error: str) -> str:
    messages = [str(w.message) for w in caught if issubclass(w.category, KernelFallbackWarning)]
    assert len(messages) == 1, messages
    message = messages[0]
    for part in ("smooth-rank sums (SupAP bounds)", "cpu (Triton's interpreter)", f"Triton {triton.__version__}",
                 error):
        assert part in message, (part, message)
    return message


@pytest.mark.parametrize(("mode", "after", "error"), [
    ("compile", 0, "CompilationError: at 12:8: ... incompatible types"),  # at the self-check
    ("wrong", 0, "the rank differs from the torch path's"),  # the self-check's comparison
    ("cuda", 4, "CUDA error: an illegal memory access"),  # probe (2 launches), step 1 (2), step 2's forward
    ("cuda", 5, "CUDA error: an illegal memory access"),  # ... step 2's backward: torch recomputes the gradient
])
def test_a_failing_kernel_gives_one_warning_and_the_torch_numbers(monkeypatch, mode, after, error) -> None:
    expected_losses, expected_weight = _train("torch")
    _auto_picks_the_kernels(monkeypatch)
    counter = _inject_rank_kernels(monkeypatch, mode, after=after)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses, weight = _train("auto")
    _one_fallback_warning(caught, error)
    assert losses == pytest.approx(expected_losses, rel=1e-10)
    torch.testing.assert_close(weight, expected_weight, rtol=1e-10, atol=1e-12)
    launches = counter[0]
    assert kernel_state("smooth-rank sums (SupAP bounds)", CPU, torch.float64) == "failed"
    _train("auto", steps=1)
    assert counter[0] == launches  # the torch path for the rest of the process: no launch any more


def test_kernels_that_pass_their_check_keep_running(monkeypatch: pytest.MonkeyPatch) -> None:
    expected_losses, _ = _train("torch")
    _auto_picks_the_kernels(monkeypatch)
    counter = _inject_rank_kernels(monkeypatch, "cuda", after=10**6)  # never fails
    with warnings.catch_warnings():
        warnings.simplefilter("error", KernelFallbackWarning)
        losses, _ = _train("auto")
    assert losses == pytest.approx(expected_losses, rel=1e-10)
    assert counter[0] == 2 + 3 * 2  # the probe's forward and backward, then each step's
    assert kernel_state("smooth-rank sums (SupAP bounds)", CPU, torch.float64) == "passed"


@pytest.mark.parametrize(("mode", "after"), [("compile", 0), ("wrong", 0), ("cuda", 3)])
def test_forced_kernels_raise_instead_of_falling_back(monkeypatch, mode: str, after: int) -> None:
    _inject_rank_kernels(monkeypatch, mode, after=after)
    with pytest.raises(KernelError, match=r"smooth-rank sums \(SupAP bounds\) failed .*engine='triton' forces"):
        _train("triton")


def _metric_problem() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    return {"embeddings": torch.randint(-1, 2, (40, 36), generator=g).float(),
            "labels": torch.randint(0, 5, (40,), generator=g),
            "ref_embeddings": torch.randint(-1, 2, (75, 36), generator=g).float(),
            "ref_labels": torch.randint(0, 5, (75,), generator=g)}


def _inject_metric_kernel(monkeypatch: pytest.MonkeyPatch, mode: str, after: int = 0) -> list[int]:
    real, counter = _triton_counts.metric_counts_kernel(CPU), [0]
    fake = _Faulty(real, mode, counter, after=after, out=9)
    monkeypatch.setattr(_triton_counts, "metric_counts_kernel", lambda device: fake)
    monkeypatch.setattr(_kernel_counts, "kernel_reason", lambda device, dtype: None)  # the kernel on CPU tensors
    return counter


@pytest.mark.parametrize(("mode", "after", "error"), [
    ("compile", 0, "CompilationError"), ("wrong", 0, "differ from"), ("cuda", 5, "CUDA error"),  # 5: the probe's
])
def test_the_metrics_kernel_falls_back_to_the_torch_counts(monkeypatch, mode: str, after: int, error: str) -> None:
    problem, options = _metric_problem(), {"normalize": False, "per_query": True, "ties": "average"}
    expected = retrieval_metric_tensors(**problem, **options)
    counter = _inject_metric_kernel(monkeypatch, mode, after)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = retrieval_metric_tensors(**problem, **options)
    messages = [str(w.message) for w in caught if issubclass(w.category, KernelFallbackWarning)]
    assert len(messages) == 1 and "metric counts" in messages[0] and error in messages[0], messages
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        torch.testing.assert_close(got[key], value, rtol=0, atol=0, equal_nan=True, msg=key)
    launches = counter[0]
    retrieval_metric_tensors(**problem, **options)
    assert counter[0] == launches and kernel_state(METRICS_KERNEL, CPU, torch.float32) == "failed"


def test_the_checks_run_at_set_up_before_the_first_training_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """The metrics kernel first runs at the first validation (after an epoch with ``num_sanity_val_steps: 0``):
    its check runs in ``on_fit_start``; a forced loss kernel that fails stops the run there, before any step."""
    import lightning as L

    from ranklit.models import EmbeddingNet, RetrievalModule
    from tests.tiny import tiny_datamodule

    _inject_metric_kernel(monkeypatch, "compile")
    seen: list[str] = []
    real_step = RetrievalModule.training_step
    monkeypatch.setattr(RetrievalModule, "training_step", lambda self, *a: seen.append(
        kernel_state(METRICS_KERNEL, CPU, torch.float32)) or real_step(self, *a))
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                        limit_val_batches=0)
    module = RetrievalModule(EmbeddingNet("test_resnet", embedding_dim=8), SupAPLoss(engine="torch"))
    with pytest.warns(KernelFallbackWarning, match="metric counts"):
        trainer.fit(module, datamodule=tiny_datamodule())
    assert seen == ["failed"]  # checked (and failed) before the first step

    seen.clear()
    _inject_rank_kernels(monkeypatch, "compile")
    module = RetrievalModule(EmbeddingNet("test_resnet", embedding_dim=8), SupAPLoss(engine="triton"))
    with pytest.raises(KernelError, match="SupAP bounds"):
        L.Trainer(accelerator="cpu", devices=1, max_steps=1, logger=False, enable_checkpointing=False,
                  enable_progress_bar=False, enable_model_summary=False).fit(module, datamodule=tiny_datamodule())
    assert seen == []


def test_triton_without_knobs_is_refused_by_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """Triton 3.3 (PyTorch 2.2-2.7) has no ``triton.knobs``: ``auto`` keeps torch, a forced engine says why."""
    monkeypatch.setattr(triton, "__version__", "3.3.1")
    monkeypatch.delattr(triton, "knobs")
    cuda = SimpleNamespace(device=torch.device("cuda", 0), dtype=torch.float32)  # only named: nothing allocated
    assert engines.smooth_rank_engine(cuda) == "torch"  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Triton 3\.3\.1 is older than 3\.4"):
        engines.smooth_rank_engine(cuda, "triton")  # type: ignore[arg-type]
    assert "Triton 3.3.1 is older than 3.4" in str(_kernel_counts.kernel_reason(torch.device("cuda"), torch.float32))


def _fake_current_device(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """``torch.cuda.device`` (the real context manager) switching a recorded current device, no GPU needed."""
    current = [0]

    def exchange(index: int) -> int:
        previous, current[0] = current[0], index if index >= 0 else current[0]
        return previous

    monkeypatch.setattr(torch.cuda, "_exchange_device", exchange)
    monkeypatch.setattr(torch.cuda, "_maybe_exchange_device", exchange)
    return current


def test_launches_run_with_the_tensors_device_current(monkeypatch: pytest.MonkeyPatch) -> None:
    current = _fake_current_device(monkeypatch)
    with _kernel_guard.kernel_device(torch.device("cuda", 1)):
        assert current == [1]  # Triton launches on the current device: the tensor's
    assert current == [0]
    entered: list[torch.device] = []
    real = _kernel_guard.kernel_device

    def recording(device: torch.device) -> Any:
        entered.append(device)
        return real(device)

    for module in (_rank_sums, _kernel_counts):  # both launchers launch inside kernel_device(tensor.device)
        monkeypatch.setattr(module, "kernel_device", recording)
    _train("triton", steps=1)
    assert entered == [CPU] * 4  # the probe's forward and backward, the step's
    entered.clear()
    _inject_metric_kernel(monkeypatch, "cuda", after=10**6)
    retrieval_metric_tensors(**_metric_problem(), normalize=False)
    assert entered and set(entered) == {CPU}
