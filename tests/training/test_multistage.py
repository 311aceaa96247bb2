"""Multistage backprop gives the gradients of plain backprop of the whole batch (docs/spec.md §3)."""

from __future__ import annotations

import copy

import pytest
import torch
from timm.layers import DropPath
from torch import Tensor, nn

from ranklit.losses import ClusterLoss, ROADMAPLoss
from ranklit.training import multistage_backward, ranking_objective

LABELS = torch.arange(30) // 5
IDS = torch.arange(30)


class _Net(nn.Module):
    """float64 MLP with a residual block; optional dropout and drop-path; no batch-norm."""

    def __init__(self, drop: float = 0.0) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.stem = nn.Linear(6, 12)
        self.block = nn.Sequential(nn.GELU(), nn.Dropout(drop), nn.Linear(12, 12))
        self.drop_path = DropPath(drop)
        self.head = nn.Linear(12, 4)
        self.double()

    def forward(self, x: Tensor) -> Tensor:
        h = self.stem(x)
        return nn.functional.normalize(self.head(h + self.drop_path(self.block(h))), dim=1)


class _RankingPlusProxies(nn.Module):
    """ROADMAP plus a proxy loss, so the loss has parameters of its own (they get their gradient in stage 2)."""

    def __init__(self) -> None:
        super().__init__()
        self.ranking, self.proxies = ROADMAPLoss(), ClusterLoss(num_classes=6, embedding_dim=4).double()

    def forward(self, embeddings: Tensor, labels: Tensor, **refs: Tensor) -> Tensor:
        return self.ranking(embeddings, labels, **refs) + self.proxies(embeddings, labels)


def _objective(loss: nn.Module):
    return lambda embeddings: ranking_objective(loss, embeddings, LABELS, IDS).loss


def _grads(*modules: nn.Module) -> list[Tensor]:
    return [p.grad.clone() for m in modules for p in m.parameters()]


def _images() -> Tensor:
    return torch.randn(30, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)


def test_chunks_of_8_give_the_full_batch_gradient() -> None:
    net, loss = _Net(), _RankingPlusProxies()
    reference_net, reference_loss = copy.deepcopy(net), copy.deepcopy(loss)
    expected = _objective(reference_loss)(reference_net(_images()))
    expected.backward()
    value, embeddings = multistage_backward(net, _images(), _objective(loss), chunk_size=8)
    torch.testing.assert_close(value, expected.detach(), rtol=0, atol=1e-12)
    torch.testing.assert_close(embeddings, reference_net(_images()).detach(), rtol=0, atol=1e-12)
    for grad, want in zip(_grads(net, loss), _grads(reference_net, reference_loss), strict=True):
        torch.testing.assert_close(grad, want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_dropout_and_drop_path_masks_are_replayed(seed: int) -> None:
    """With dropout, the gradient is that of plain backprop through the same chunked forward (same masks)."""
    net = _Net(drop=0.3)
    reference = copy.deepcopy(net)
    torch.manual_seed(seed)
    expected = _objective(ROADMAPLoss())(torch.cat([reference(c) for c in _images().split(8)]))
    expected.backward()
    after_reference = torch.rand(3)
    torch.manual_seed(seed)
    value, _ = multistage_backward(net, _images(), _objective(ROADMAPLoss()), chunk_size=8)
    torch.testing.assert_close(torch.rand(3), after_reference)  # the random stream continues as after one pass
    torch.testing.assert_close(value, expected.detach(), rtol=0, atol=1e-12)
    for grad, want in zip(_grads(net), _grads(reference), strict=True):
        torch.testing.assert_close(grad, want, rtol=1e-9, atol=1e-12)
    other = copy.deepcopy(reference)
    other.zero_grad()
    torch.manual_seed(seed + 10)  # other masks, another gradient: the replay is what makes the test pass
    _objective(ROADMAPLoss())(torch.cat([other(c) for c in _images().split(8)])).backward()
    assert max((a - b).abs().max() for a, b in zip(_grads(other), _grads(reference), strict=True)) > 1e-6


def test_batchnorm_running_statistics_are_updated_once_per_chunk() -> None:
    net = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Linear(8, 4)).double()
    reference = copy.deepcopy(net)
    with torch.no_grad():
        for chunk in _images().split(8):
            reference(chunk)
    multistage_backward(net, _images(), lambda e: e.square().sum(), chunk_size=8)
    torch.testing.assert_close(net[1].running_mean, reference[1].running_mean)
    torch.testing.assert_close(net[1].running_var, reference[1].running_var)
    assert int(net[1].num_batches_tracked) == 4


def test_invalid_inputs_are_rejected() -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        multistage_backward(_Net(), _images(), lambda e: e.sum(), chunk_size=0)
    with pytest.raises(ValueError, match="does not depend on the embeddings"):
        multistage_backward(_Net(), _images(), lambda e: torch.zeros((), requires_grad=True), chunk_size=8)
