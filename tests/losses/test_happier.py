"""HAPLoss and HAPPIERLoss against the float64 loop oracles of docs/spec.md §1–2, plus their properties."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from ranklit.functional import hap_loss, hap_surrogate
from ranklit.losses import ClusterLoss, HAPLoss, HAPPIERLoss, LevelSumLoss, SupAPLoss
from tests.oracles import hierarchical_losses as oracle
from tests.oracles import losses as binary_oracle


def hierarchical_labels(fine: Tensor, num_levels: int) -> Tensor:
    """``[B, L]`` labels of a consistent hierarchy: column h groups the fine classes by ``2**h``."""
    return torch.stack([fine // 2**h for h in range(num_levels)], dim=1)


def make_problem(num_levels: int, seed: int, refs: bool, batch: int = 10) -> tuple[dict, dict]:
    """A float64 retrieval problem; with ``refs`` 5 queries rank 12 items that contain them (excluded by id)."""
    gen = torch.Generator().manual_seed(seed)
    fine = torch.randint(0, 6, (batch + 2,), generator=gen)
    fine[-1] = 31  # a class alone at every level: a query without relevant item
    labels = hierarchical_labels(fine, num_levels)
    emb = F.normalize(torch.randn(batch + 2, 4, generator=gen, dtype=torch.float64), dim=1)
    if not refs:
        return {"embeddings": emb[:batch].requires_grad_(), "labels": labels[:batch]}, {}
    ref_emb = emb.clone().requires_grad_()
    ref_ids = torch.randperm(batch + 2, generator=gen) + 7
    kwargs = {"ref_embeddings": ref_emb, "ref_labels": labels, "ids": ref_ids[-5:], "ref_ids": ref_ids}
    return {"embeddings": emb[-5:].clone().requires_grad_(), "labels": labels[-5:]}, kwargs


def leaves(args: dict, kwargs: dict) -> list[Tensor]:
    return [args["embeddings"]] + ([kwargs["ref_embeddings"]] if kwargs else [])


def check_against_oracle(loss: Tensor, expected: Tensor, args: dict, kwargs: dict) -> None:
    torch.testing.assert_close(loss, expected, rtol=1e-10, atol=1e-12)
    got = torch.autograd.grad(loss, leaves(args, kwargs))
    want = torch.autograd.grad(expected, leaves(args, kwargs))
    for g, w in zip(got, want, strict=False):
        assert g.abs().sum() > 0
        torch.testing.assert_close(g, w, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("num_levels", [1, 2, 3])
@pytest.mark.parametrize("refs", [False, True], ids=["batch", "refs"])
@pytest.mark.parametrize("with_hrank", [True, False], ids=["hrank", "no_hrank"])
def test_hap_loss_matches_oracle(num_levels: int, refs: bool, with_hrank: bool) -> None:
    args, kwargs = make_problem(num_levels, seed=num_levels, refs=refs)
    loss = HAPLoss(with_hrank=with_hrank, chunk_size=3)(**args, **kwargs)
    assert loss.dtype == torch.float64
    check_against_oracle(loss, oracle.hap_loss(**args, with_hrank=with_hrank, **kwargs), args, kwargs)


def test_hap_loss_hyperparameters_match_oracle() -> None:
    args, kwargs = make_problem(3, seed=5, refs=False)
    steps = oracle.Steps(tau=0.1, rho=3.0, delta=0.2, leak=2.0, beta=4.0, gamma=0.25)
    loss = HAPLoss(alpha=3.0, tau=0.1, rho=3.0, delta=0.2, leak=2.0, beta=4.0, gamma=0.25)(**args)
    check_against_oracle(loss, oracle.hap_loss(**args, alpha=3.0, steps=steps), args, kwargs)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("num_levels", [2, 3])
def test_surrogate_lower_bounds_exact_hap_per_query(seed: int, num_levels: int) -> None:
    args, _ = make_problem(num_levels, seed=seed + 10, refs=False, batch=16)
    emb, labels = args["embeddings"].detach(), args["labels"]
    loss = HAPLoss()(emb, labels)
    assert loss >= 1.0 - oracle.mean_hap(emb, labels) - 1e-12
    scores = emb @ emb.T
    levels = torch.tensor([[oracle.level(a.tolist(), b.tolist()) for b in labels] for a in labels])
    hap, has_relevant = hap_surrogate(scores, levels, num_levels, ~torch.eye(len(emb), dtype=torch.bool))
    for q, (s, lv) in enumerate(oracle.retrieval_sets(emb, labels)):
        exact = oracle.exact_hap(s, lv, num_levels)
        assert has_relevant[q] == (exact is not None)
        if exact is not None:
            assert hap[q] <= exact + 1e-12


@pytest.mark.parametrize("seed", range(3))
def test_single_level_is_supap_and_hap_is_ap(seed: int) -> None:
    args, _ = make_problem(1, seed=seed, refs=False, batch=12)
    emb, fine = args["embeddings"], args["labels"][:, 0]
    loss = HAPLoss()(emb, fine)
    supap = SupAPLoss()(emb, fine)
    torch.testing.assert_close(loss, supap, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(loss, oracle.supap_loss(emb, fine), rtol=1e-10, atol=1e-12)
    (g_hap,) = torch.autograd.grad(loss, emb)
    (g_supap,) = torch.autograd.grad(supap, emb)
    torch.testing.assert_close(g_hap, g_supap)
    exact_ap = binary_oracle.average_precision(emb.detach(), fine)
    assert oracle.mean_hap(emb.detach(), fine) == pytest.approx(float(exact_ap), abs=1e-12)
    assert oracle.mean_ap(emb.detach(), fine) == pytest.approx(float(exact_ap), abs=1e-12)


def test_perfect_hierarchical_ranking_reaches_minimum() -> None:
    levels = torch.tensor([[3, 3, 2, 2, 1, 0, 0], [0, 1, 1, 2, 3, 0, 0]])
    scores = 0.2 * levels.double() + 0.001 * torch.arange(7.0, dtype=torch.float64)
    hap, _ = hap_surrogate(scores, levels, num_levels=3)
    torch.testing.assert_close(hap, torch.ones(2, dtype=torch.float64), atol=1e-6, rtol=0)
    swapped = scores.clone()
    swapped[0, 2], swapped[0, 4] = scores[0, 4], scores[0, 2]  # a level-1 item above a level-2 item
    assert hap_loss(swapped, levels, num_levels=3) > hap_loss(scores, levels, num_levels=3) + 0.01


def test_chunking_and_permutation_do_not_change_the_loss() -> None:
    args, _ = make_problem(3, seed=3, refs=False, batch=14)
    emb, labels = args["embeddings"], args["labels"]
    full = HAPLoss()(emb, labels)
    (g_full,) = torch.autograd.grad(full, emb)
    one = HAPLoss(chunk_size=1)(emb, labels)
    (g_one,) = torch.autograd.grad(one, emb)
    torch.testing.assert_close(one, full)
    torch.testing.assert_close(g_one, g_full)
    perm = torch.randperm(len(emb), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(HAPLoss()(emb[perm], labels[perm]), full)


def test_dtypes() -> None:
    args, _ = make_problem(2, seed=0, refs=False)
    emb, labels = args["embeddings"].detach(), args["labels"]
    assert HAPLoss()(emb.float(), labels).dtype == torch.float32
    assert HAPLoss()(emb.bfloat16(), labels).dtype == torch.float32


def test_gradcheck_with_soft_steps() -> None:
    emb = F.normalize(torch.randn(6, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64), dim=1)
    labels = torch.tensor([[0, 0], [0, 0], [1, 0], [2, 1], [2, 1], [3, 1]])
    loss = HAPLoss(tau=0.5, rho=2.0, delta=0.5, leak=1.0, beta=2.0, gamma=0.1, chunk_size=2)
    assert torch.autograd.gradcheck(lambda e: loss(e, labels), (emb.requires_grad_(),))


def test_invalid_inputs_raise() -> None:
    emb = F.normalize(torch.randn(4, 3), dim=1)
    with pytest.raises(ValueError, match="relevant item"):
        HAPLoss()(emb, torch.tensor([[0, 0], [1, 1], [2, 2], [3, 3]]))
    with pytest.raises(ValueError, match="consistent hierarchy"):
        HAPLoss()(emb, torch.tensor([[0, 0], [0, 1], [2, 2], [3, 3]]))
    for bad in ({"gamma": 1.5}, {"tau": 0.0}, {"leak": -1.0}, {"alpha": -1.0}, {"chunk_size": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            HAPLoss(**bad)
    with pytest.raises(ValueError, match="levels"):
        hap_loss(torch.zeros(2, 3), torch.zeros(2, 2, dtype=torch.long), num_levels=1)


def test_happier_is_weighted_sum_and_trains_the_proxies() -> None:
    args, kwargs = make_problem(2, seed=4, refs=True)
    torch.manual_seed(0)
    happier = HAPPIERLoss(num_classes=32, embedding_dim=4, lam=0.3).double()
    cluster = ClusterLoss(num_classes=32, embedding_dim=4).double()
    cluster.load_state_dict(happier.cluster.state_dict())
    loss = happier(**args, **kwargs)
    expected = 0.7 * HAPLoss()(**args, **kwargs) + 0.3 * cluster(args["embeddings"], args["labels"])
    torch.testing.assert_close(loss, expected)
    assert [name for name, _ in happier.named_parameters()] == ["cluster.proxies"]
    loss.backward()
    assert happier.cluster.proxies.grad is not None and happier.cluster.proxies.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="num_classes"):
        HAPPIERLoss(num_classes=4, embedding_dim=4)(**args, **kwargs)
    with pytest.raises(ValueError, match="lam"):
        HAPPIERLoss(num_classes=4, embedding_dim=4, lam=1.5)


GENERIC = {
    "HAPLoss": HAPLoss,
    "HAPPIERLoss": lambda: HAPPIERLoss(num_classes=6, embedding_dim=9),
    "LevelSumLoss": lambda: LevelSumLoss(SupAPLoss()),
}


def _separated_batch(dtype: torch.dtype = torch.float64) -> tuple[Tensor, Tensor]:
    """Three images per fine class; same fine class scores 1, same coarse class 0.5, different coarse class 0."""
    fine = torch.arange(6).repeat_interleave(3)
    labels = hierarchical_labels(fine, 2)
    eye = torch.eye(9, dtype=torch.float64)
    emb = F.normalize(eye[fine] + eye[6 + labels[:, 1]])
    return emb.to(dtype), labels


@pytest.mark.parametrize("name", sorted(GENERIC))
def test_generic_calls_dtypes_and_gradients(name: str) -> None:
    torch.manual_seed(0)
    loss_fn = GENERIC[name]()
    emb, labels = _separated_batch()
    emb = (emb + 0.3 * torch.randn(emb.shape, dtype=torch.float64)).requires_grad_()
    loss = loss_fn(emb.float(), labels)
    loss.backward()
    assert torch.isfinite(emb.grad).all() and emb.grad.abs().sum() > 0
    for pname, param in loss_fn.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, pname
    half = loss_fn(emb.detach().bfloat16(), labels)
    assert half.dtype == torch.float32
    torch.testing.assert_close(half, loss_fn(emb.detach().bfloat16().float(), labels))
    ids = torch.arange(100, 118)
    explicit = loss_fn(emb, labels, ref_embeddings=emb, ref_labels=labels, ids=ids, ref_ids=ids)
    torch.testing.assert_close(explicit, loss_fn(emb, labels))


def test_perfect_separation_and_lone_queries() -> None:
    emb, labels = _separated_batch()
    assert HAPLoss()(emb, labels).item() == pytest.approx(0.0, abs=1e-12)
    bad = emb[torch.randperm(len(emb), generator=torch.Generator().manual_seed(0))]
    assert HAPLoss()(bad, labels) > 0.1
    lone = F.normalize(torch.ones(1, 9, dtype=torch.float64), dim=1)
    ids = torch.arange(18)
    refs = {"ref_embeddings": emb, "ref_labels": labels, "ref_ids": ids}
    with_lone = HAPLoss()(torch.cat([bad, lone]), torch.cat([labels, torch.tensor([[99, 99]])]),
                          ids=torch.arange(19), **refs)
    torch.testing.assert_close(with_lone, HAPLoss()(bad, labels, ids=ids, **refs))
