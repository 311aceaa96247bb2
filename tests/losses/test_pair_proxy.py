"""Contrastive, triplet (semi-hard, distance-weighted), NormSoftmax and ProxyNCA++ against the float64 oracles."""

from __future__ import annotations

import pytest
import torch
from torch.nn.functional import normalize

from ranklit.functional.losses import _triplet as triplet_module
from ranklit.functional.losses._triplet import _distance_weighted_negatives
from ranklit.losses import ContrastiveLoss, NormSoftmaxLoss, ProxyNCAPPLoss, TripletLoss
from tests.losses.cases import CASES, grads, make_case, oracle_args
from tests.oracles import losses as oracle

LOSSES = {
    "contrastive": (ContrastiveLoss, oracle.contrastive),
    "contrastive_margins": (
        lambda: ContrastiveLoss(pos_margin=0.8, neg_margin=0.1),
        lambda *a: oracle.contrastive(*a, pos_margin=0.8, neg_margin=0.1),
    ),
    "triplet": (lambda: TripletLoss(chunk_size=2), oracle.triplet_semihard),
    "triplet_margin": (lambda: TripletLoss(margin=1.0), lambda *a: oracle.triplet_semihard(*a, margin=1.0)),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_matches_oracle(name: str, case: str) -> None:
    make_loss, reference = LOSSES[name]
    args, kwargs = make_case(case, seed=7)
    loss = make_loss()(**args, **kwargs)
    expected = reference(*oracle_args(args, kwargs))
    torch.testing.assert_close(loss, expected, rtol=1e-9, atol=1e-12)
    for got, want in zip(grads(loss, args, kwargs), grads(expected, args, kwargs), strict=False):
        torch.testing.assert_close(got, want, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("hierarchical", [False, True])
@pytest.mark.parametrize(
    ("make_loss", "temperature", "squared"),
    [
        (NormSoftmaxLoss, 0.05, False),
        (ProxyNCAPPLoss, 1 / 9, True),
        (lambda c, d: ProxyNCAPPLoss(c, d, 0.5), 0.5, True),
    ],
)
def test_proxy_losses_match_oracle(make_loss, temperature: float, squared: bool, hierarchical: bool) -> None:
    torch.manual_seed(0)
    loss = make_loss(5, 4).double()
    emb = normalize(torch.randn(9, 4, dtype=torch.float64), dim=1).requires_grad_()
    labels = torch.randint(0, 5, (9,))
    labels = torch.stack([labels, labels // 2], dim=1) if hierarchical else labels
    value = loss(emb, labels, ref_embeddings=emb.detach(), ref_labels=labels)  # ref_* ignored
    expected = oracle.proxy_softmax(emb, labels, loss.proxies, temperature, squared_distance=squared)
    torch.testing.assert_close(value, expected)
    got = torch.autograd.grad(value, [emb, loss.proxies])
    want = torch.autograd.grad(expected, [emb, loss.proxies])
    for g, w in zip(got, want, strict=False):
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize("make_loss", [NormSoftmaxLoss, ProxyNCAPPLoss])
def test_proxy_losses_reject_out_of_range_labels(make_loss) -> None:
    emb = normalize(torch.randn(4, 3), dim=1)
    with pytest.raises(ValueError, match="num_classes"):
        make_loss(3, 3)(emb, torch.tensor([0, 1, 2, 3]))
    with pytest.raises(ValueError, match="embedding_dim"):
        make_loss(3, 5)(emb, torch.tensor([0, 1, 2, 2]))


def test_distance_weighted_draws_negatives_in_proportion_to_inverse_density() -> None:
    torch.manual_seed(0)
    dim = 8
    distances = torch.tensor([[0.3, 1.0, 1.2, 1.5, 0.1]], dtype=torch.float64)
    negatives = torch.tensor([[False, True, True, True, False]])
    draws = _distance_weighted_negatives(distances, negatives, 20000, dim, 0.5)
    counts = torch.bincount(draws[0], minlength=5).double() / draws.numel()
    d = distances[0, 1:4]
    weights = 1.0 / (d ** (dim - 2) * (1 - d**2 / 4) ** ((dim - 3) / 2))
    assert counts[0] == 0 and counts[4] == 0
    torch.testing.assert_close(counts[1:4], weights / weights.sum(), atol=0.02, rtol=0.0)


def _tangent(grad: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
    """The gradient's component tangent to the unit sphere at ``emb`` (what survives an L2 normalisation)."""
    return grad - (grad * emb).sum(dim=1, keepdim=True) * emb


def test_distance_weighted_triplet_matches_the_oracle_on_its_drawn_negatives(monkeypatch) -> None:
    """Value and gradient equal a float64 loop over (anchor, positive) pairs with the negatives the loss drew, and
    every drawn negative is a negative of its anchor."""
    drawn: list[torch.Tensor] = []

    def record(*args, **kwargs):
        chosen = _distance_weighted_negatives(*args, **kwargs)
        drawn.append(chosen)
        return chosen

    monkeypatch.setattr(triplet_module, "_distance_weighted_negatives", record)
    torch.manual_seed(0)
    labels = torch.arange(4).repeat(4)  # 4 classes x 4 images: 3 positives per anchor, none padded
    emb = normalize(torch.randn(16, 8, dtype=torch.float64), dim=1).requires_grad_()
    loss = TripletLoss(mining="distance_weighted", margin=0.5)(emb, labels)
    (chosen,) = drawn
    assert chosen.shape == (16, 3)
    terms = []
    for a in range(16):
        positives = [j for j in range(16) if j != a and labels[j] == labels[a]]  # ascending, as the loss orders them
        for i, p in enumerate(positives):
            n = int(chosen[a, i])
            assert labels[n] != labels[a]
            d_ap = torch.sqrt(2 - 2 * emb[a] @ emb[p])
            d_an = torch.sqrt(2 - 2 * emb[a] @ emb[n])
            terms.append(torch.clamp(d_ap - d_an + 0.5, min=0))
    expected = torch.stack(terms).mean()
    torch.testing.assert_close(loss, expected, rtol=1e-10, atol=1e-12)
    assert expected > 0
    (got,) = torch.autograd.grad(loss, emb)
    (want,) = torch.autograd.grad(expected, emb)
    torch.testing.assert_close(_tangent(got, emb.detach()), _tangent(want, emb.detach()), rtol=1e-8, atol=1e-10)


def test_triplet_zero_when_negatives_are_farther_by_the_margin() -> None:
    emb = torch.tensor([[1.0, 0.0], [0.995, 0.0998], [-1.0, 0.0], [-0.995, -0.0998]])
    assert TripletLoss()(normalize(emb, dim=1), torch.tensor([0, 0, 1, 1])).item() == 0.0


@pytest.mark.parametrize(
    ("make", "arg"),
    [
        (lambda: TripletLoss(margin=0.0), "margin"),
        (lambda: TripletLoss(mining="hard"), "mining"),
        (lambda: ContrastiveLoss(pos_margin=0.2, neg_margin=0.5), "neg_margin"),
        (lambda: ContrastiveLoss(pos_margin=1.5), "pos_margin"),
        (lambda: NormSoftmaxLoss(0, 4), "num_classes"),
        (lambda: ProxyNCAPPLoss(3, 4, temperature=-1.0), "temperature"),
    ],
)
def test_rejects_bad_parameters(make, arg: str) -> None:
    with pytest.raises(ValueError, match=arg):
        make()
