"""Device audit: losses, metrics and the memory bank create every tensor on their inputs' device, never on the default
device. The default device is pointed at ``meta`` (tensors without data) while the inputs stay on the CPU: a tensor
created without ``device=`` would land on ``meta`` and the computation would fail or return a ``meta`` result, so
each result must equal, on the CPU, the one computed with the default device left alone. On a GPU machine that is
the difference between a run that works and one that copies to ``cuda:0`` from every rank."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch
from torch import Tensor

from ranklit.functional import retrieval_metrics
from ranklit.metrics import DecomposabilityGap, RetrievalMetrics
from ranklit.training import CrossBatchMemory, ranking_objective
from tests.losses.registry import DIM, NUM_CLASSES, RANDOM_LOSSES, REGISTRY


@contextmanager
def _default_device_elsewhere() -> Iterator[None]:
    torch.set_default_device("meta")
    try:
        yield
    finally:
        torch.set_default_device(None)


def _problem(levels: int = 2) -> tuple[Tensor, Tensor, Tensor]:
    torch.manual_seed(1)
    fine = torch.arange(NUM_CLASSES).repeat_interleave(4)
    labels = torch.stack([fine, fine // 2], 1)[:, :levels]
    return torch.randn(fine.numel(), DIM), labels, torch.arange(fine.numel()) + 100


def _both(compute: Callable[[], Any]) -> tuple[Any, Any]:
    """``compute()`` with the default device left alone, then with it pointed at ``meta``."""
    expected = compute()
    with _default_device_elsewhere():
        return expected, compute()


def _assert_same_on_cpu(got: Any, expected: Any) -> None:
    if isinstance(expected, dict):
        assert set(got) == set(expected)
        for key in expected:
            _assert_same_on_cpu(got[key], expected[key])
    elif isinstance(expected, Tensor):
        assert got.device == torch.device("cpu")
        torch.testing.assert_close(got, expected, equal_nan=True)
    else:
        assert got == pytest.approx(expected, nan_ok=True)


@pytest.mark.parametrize("name", sorted(set(REGISTRY) - RANDOM_LOSSES))
def test_every_loss_and_its_gradient_stay_on_the_inputs_device(name: str) -> None:
    embeddings, labels, ids = _problem()
    labels = labels if name.startswith(("HAP", "CSL", "LevelSum")) else labels[:, 0]
    loss_fn = REGISTRY[name]()  # built on the CPU, like a model's loss before the run

    def value_and_gradient() -> tuple[Tensor, Tensor]:
        leaf = embeddings.clone().requires_grad_(True)
        half = embeddings.shape[0] // 2
        loss = loss_fn(leaf[:half], labels[:half], ref_embeddings=leaf, ref_labels=labels, ids=ids[:half],
                       ref_ids=ids)
        loss = loss + loss_fn(leaf, labels)
        (grad,) = torch.autograd.grad(loss, leaf)
        return loss.detach(), grad

    value_and_gradient()  # CSLLoss learns the class hierarchy from its first batches: both runs start after that
    expected, got = _both(value_and_gradient)
    _assert_same_on_cpu(got[0], expected[0])
    _assert_same_on_cpu(got[1], expected[1])


@pytest.mark.parametrize("levels", [1, 2])
def test_the_metrics_stay_on_the_inputs_device(levels: int) -> None:
    embeddings, labels, ids = _problem(levels)

    def both_apis() -> tuple[dict[str, float], dict[str, Tensor], dict[str, Tensor]]:
        metric = RetrievalMetrics(recall_at=(1, 4))
        metric.update(embeddings[:10], labels[:10], ids[:10])
        metric.update(embeddings[10:], labels[10:], ids[10:])
        gallery = RetrievalMetrics(recall_at=(1, 4))
        gallery.update(embeddings[:6], labels[:6], ids[:6])
        gallery.update(embeddings[6:], labels[6:], ids[6:], gallery=True)
        return retrieval_metrics(embeddings, labels, ids=ids, chunk_size=5), metric.compute(), gallery.compute()

    expected, got = _both(both_apis)
    for got_part, expected_part in zip(got, expected, strict=True):
        _assert_same_on_cpu(got_part, expected_part)


def test_the_memory_bank_and_the_decomposability_gap_stay_on_the_inputs_device() -> None:
    embeddings, labels, ids = _problem(1)
    loss_fn = REGISTRY["SmoothAPLoss"]()

    # built before the default device moves, as a model's are: their scalar states follow the module, not the inputs
    parts = iter([(CrossBatchMemory(size=16), DecomposabilityGap(), CrossBatchMemory(size=16)) for _ in range(2)])

    def two_steps() -> tuple[Tensor, Tensor, Tensor, dict[str, float]]:
        memory, gap, restored = next(parts)
        total = torch.zeros((), device=embeddings.device)
        for batch in (slice(0, 12), slice(12, 24)):
            out = ranking_objective(loss_fn, embeddings[batch], labels[batch], ids[batch], memory=memory)
            gap.update(embeddings[batch], labels[batch], ids[batch], ref_embeddings=out.ref_embeddings,
                       ref_labels=out.ref_labels, ref_ids=out.ref_ids)
            total = total + out.loss
        restored.load_state_dict(memory.state_dict())
        return total, restored.embeddings, restored.ids, gap.compute()

    expected, got = _both(two_steps)
    for got_part, expected_part in zip(got, expected, strict=True):
        _assert_same_on_cpu(got_part, expected_part)
