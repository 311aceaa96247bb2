"""ClusterLoss (HAPPIER Eq. 6) against a direct cross-entropy and the loop oracle."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ranklit.losses import ClusterLoss
from tests.oracles import hierarchical_losses as oracle


def _problem(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    emb = F.normalize(torch.randn(9, 5, generator=gen, dtype=torch.float64), dim=1).requires_grad_()
    fine = torch.randint(0, 6, (9,), generator=gen)
    return emb, torch.stack([fine, fine // 3], dim=1)


@pytest.mark.parametrize("temperature", [0.05, 0.5])
def test_matches_direct_cross_entropy_and_oracle(temperature: float) -> None:
    emb, labels = _problem()
    torch.manual_seed(0)
    loss_fn = ClusterLoss(num_classes=6, embedding_dim=5, temperature=temperature).double()
    loss = loss_fn(emb, labels)
    proxies = loss_fn.proxies.detach().clone().requires_grad_()
    direct = F.cross_entropy(emb @ (proxies / proxies.norm(dim=1, keepdim=True)).T / temperature, labels[:, 0])
    reference = oracle.cluster_loss(emb, labels[:, 0], proxies, temperature)
    torch.testing.assert_close(loss, direct)
    torch.testing.assert_close(loss, reference)
    got = torch.autograd.grad(loss, [emb, loss_fn.proxies])
    want = torch.autograd.grad(reference, [emb, proxies])
    for g, w in zip(got, want, strict=False):
        assert g.abs().sum() > 0
        torch.testing.assert_close(g, w)


def test_flat_labels_refs_ignored_and_dtype() -> None:
    emb, labels = _problem(1)
    loss_fn = ClusterLoss(num_classes=6, embedding_dim=5)
    flat = loss_fn(emb.float(), labels[:, 0])
    assert flat.dtype == torch.float32
    torch.testing.assert_close(loss_fn(emb.float(), labels), flat)
    refs = {"ref_embeddings": emb.float()[:3], "ref_labels": labels[:3], "ids": torch.arange(9),
            "ref_ids": torch.arange(3)}
    torch.testing.assert_close(loss_fn(emb.float(), labels, **refs), flat)
    assert [n for n, _ in loss_fn.named_parameters()] == ["proxies"]


def test_invalid_inputs_raise() -> None:
    emb, labels = _problem()
    top = int(labels[:, 0].max())
    with pytest.raises(ValueError, match=rf"\[0, {top}\)"):
        ClusterLoss(num_classes=top, embedding_dim=5)(emb, labels)
    with pytest.raises(ValueError, match="must lie in"):
        ClusterLoss(num_classes=6, embedding_dim=5)(emb, -labels - 1)
    with pytest.raises(ValueError, match="embedding_dim"):
        ClusterLoss(num_classes=6, embedding_dim=4)(emb, labels)
    with pytest.raises(ValueError, match="temperature"):
        ClusterLoss(num_classes=6, embedding_dim=5, temperature=0.0)
    with pytest.raises(ValueError, match="num_classes"):
        ClusterLoss(num_classes=0, embedding_dim=5)
