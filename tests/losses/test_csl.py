"""CSLLoss (Sun et al. 2021) against the loop oracle; hierarchy registration and errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ranklit.losses import CSLLoss
from tests.oracles import hierarchical_losses as oracle

CLASS_LABELS = torch.tensor([[c, c // 2, c // 4] for c in range(8)])


def _problem(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    emb = F.normalize(torch.randn(10, 6, generator=gen, dtype=torch.float64), dim=1).requires_grad_()
    return emb, CLASS_LABELS[torch.randint(0, 8, (10,), generator=gen)]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("scale", [32.0, 4.0])
def test_matches_oracle(seed: int, scale: float) -> None:
    emb, labels = _problem(seed)
    torch.manual_seed(seed)
    loss_fn = CSLLoss(num_classes=8, embedding_dim=6, scale=scale).double()
    loss_fn.register_hierarchy(CLASS_LABELS)
    loss = loss_fn(emb, labels)
    proxies = loss_fn.proxies.detach().clone().requires_grad_()
    expected = oracle.csl_loss(emb, labels, proxies, CLASS_LABELS, [0.25, 0.35, 0.45], scale)
    torch.testing.assert_close(loss, expected)
    got = torch.autograd.grad(loss, [emb, loss_fn.proxies])
    want = torch.autograd.grad(expected, [emb, proxies])
    for g, w in zip(got, want, strict=False):
        assert g.abs().sum() > 0
        torch.testing.assert_close(g, w)


def test_hierarchy_is_learnt_from_batches() -> None:
    loss_fn = CSLLoss(num_classes=8, embedding_dim=6, margins=(0.2, 0.3), scale=6.0).double()
    emb, _ = _problem(2)
    labels = CLASS_LABELS[[0, 1, 4, 4, 1, 0, 0, 4, 1, 1], :2]
    expected_known = torch.tensor([[c, -1] for c in range(8)])
    expected_known[[0, 1, 4]] = CLASS_LABELS[[0, 1, 4], :2]
    loss = loss_fn(emb, labels)
    assert loss_fn.class_labels.tolist() == expected_known.tolist()
    assert "class_labels" in loss_fn.state_dict()
    # proxies 2, 3, 5, 6, 7 (coarse label unknown) are negatives at the fine level only
    expected = oracle.csl_loss(emb, labels, loss_fn.proxies, expected_known, [0.2, 0.3], 6.0)
    everything = oracle.csl_loss(emb, labels, loss_fn.proxies, CLASS_LABELS[:, :2], [0.2, 0.3], 6.0)
    torch.testing.assert_close(loss, expected)
    assert everything > loss


def test_invalid_inputs_raise() -> None:
    emb, labels = _problem()
    with pytest.raises(ValueError, match="one value per level"):
        CSLLoss(num_classes=8, embedding_dim=6)(emb, labels[:, :2])
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        CSLLoss(num_classes=4, embedding_dim=6)(emb, labels)
    loss_fn = CSLLoss(num_classes=8, embedding_dim=6)
    loss_fn.register_hierarchy(CLASS_LABELS)
    with pytest.raises(ValueError, match="seen before"):
        loss_fn.register_hierarchy(torch.tensor([[3, 0, 0]]))
    with pytest.raises(ValueError, match="scale"):
        CSLLoss(num_classes=8, embedding_dim=6, scale=-1.0)
