"""LevelSumLoss (the Σ baselines of HAPPIER's tables) against per-level binary oracles."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ranklit.losses import ClusterLoss, LevelSumLoss, SupAPLoss
from tests.oracles import losses as binary_oracle


def _problem() -> tuple[torch.Tensor, torch.Tensor, dict]:
    gen = torch.Generator().manual_seed(3)
    emb = F.normalize(torch.randn(14, 4, generator=gen, dtype=torch.float64), dim=1)
    fine = torch.randint(0, 8, (14,), generator=gen)
    labels = torch.stack([fine, fine // 2, fine // 4], dim=1)
    ids = torch.arange(14) + 50
    refs = {"ref_embeddings": emb.clone().requires_grad_(), "ref_labels": labels, "ids": ids[:6], "ref_ids": ids}
    return emb[:6].clone().requires_grad_(), labels[:6], refs


def test_sums_a_shared_binary_loss_over_levels() -> None:
    emb, labels, refs = _problem()
    loss = LevelSumLoss(SupAPLoss(chunk_size=2))(emb, labels, **refs)
    expected = sum(
        binary_oracle.supap(emb, labels[:, h], refs["ref_embeddings"], refs["ref_labels"][:, h], refs["ids"],
                            refs["ref_ids"])
        for h in range(3)
    )
    torch.testing.assert_close(loss, expected)
    leaves = [emb, refs["ref_embeddings"]]
    for got, want in zip(torch.autograd.grad(loss, leaves), torch.autograd.grad(expected, leaves), strict=False):
        torch.testing.assert_close(got, want)


def test_one_loss_per_level() -> None:
    emb, labels, _ = _problem()
    per_level = [ClusterLoss(num_classes=8 // 2**h, embedding_dim=4).double() for h in range(3)]
    loss = LevelSumLoss(per_level)(emb, labels)
    expected = sum(per_level[h](emb, labels[:, h]) for h in range(3))
    torch.testing.assert_close(loss, expected)
    flat = LevelSumLoss(SupAPLoss())(emb, labels[:, 0])
    torch.testing.assert_close(flat, SupAPLoss()(emb, labels[:, 0]))


def test_invalid_arguments_raise() -> None:
    emb, labels, _ = _problem()
    with pytest.raises(ValueError, match="3 columns"):
        LevelSumLoss([SupAPLoss(), SupAPLoss()])(emb, labels)
    with pytest.raises(TypeError, match="losses"):
        LevelSumLoss([])
    with pytest.raises(TypeError, match="losses"):
        LevelSumLoss(["supap"])  # type: ignore[list-item]
