"""Bad input raises a clear ValueError for every loss of the registry."""

from __future__ import annotations

import pytest
import torch
from torch.nn.functional import normalize

import ranklit.losses
from tests.losses.registry import DIM, PROXY_LOSSES, REGISTRY
from tests.oracles import losses as oracle

NAMES = sorted(REGISTRY)
RANKING = sorted(set(NAMES) - PROXY_LOSSES)


def _emb(n: int = 8) -> torch.Tensor:
    return normalize(torch.randn(n, DIM, generator=torch.Generator().manual_seed(0)), dim=1)


LABELS = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda f: f(_emb(), LABELS[:6]), "rows"),
        (lambda f: f(_emb()[None], LABELS), r"\[N, D\]"),
        (lambda f: f(_emb().index_fill(0, torch.tensor([3]), float("nan")), LABELS), "NaN"),
        (lambda f: f(_emb().index_fill(0, torch.tensor([1]), float("inf")), LABELS), "infinite"),
        (lambda f: f(_emb(), LABELS.reshape(2, 2, 2)), r"\[N, L\]"),
        (lambda f: f(torch.zeros(8, 0, requires_grad=True), LABELS), "embeddings of size 0"),
        (lambda f: f(torch.zeros(8, DIM, requires_grad=True), LABELS), r"are all zero: every score is 0"),  # issue 47
    ],
)
def test_bad_embeddings_or_labels(name: str, call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call(REGISTRY[name]())


@pytest.mark.parametrize("name", RANKING)
def test_bad_retrieval_set(name: str) -> None:
    loss_fn = REGISTRY[name]()
    with pytest.raises(ValueError, match="dimension"):
        loss_fn(_emb(), LABELS, ref_embeddings=torch.ones(8, DIM + 1), ref_labels=LABELS)
    with pytest.raises(ValueError, match="together"):
        loss_fn(_emb(), LABELS, ref_embeddings=_emb(), ref_labels=LABELS, ids=torch.arange(8))
    with pytest.raises(ValueError, match="ref_labels"):
        loss_fn(_emb(), LABELS, ref_embeddings=_emb())
    with pytest.raises(ValueError, match="one id per embedding"):
        loss_fn(_emb(), LABELS, ref_embeddings=_emb(), ref_labels=LABELS, ids=torch.arange(3), ref_ids=torch.arange(8))


@pytest.mark.parametrize("name", RANKING)
def test_batch_without_any_positive_points_at_the_sampler(name: str) -> None:
    with pytest.raises(ValueError, match="PKSampler"):
        REGISTRY[name]()(_emb(), torch.arange(8))


@pytest.mark.parametrize("name", RANKING)
def test_retrieval_set_without_positive_for_any_query(name: str) -> None:
    # Every query's only positive is itself, excluded by id.
    ids = torch.arange(8)
    with pytest.raises(ValueError, match=r"(?i)no query has a (positive|relevant item)"):
        REGISTRY[name]()(
            _emb(), torch.arange(8), ref_embeddings=_emb(), ref_labels=torch.arange(8), ids=ids, ref_ids=ids
        )


# (temperature, squared distance) of each single-level proxy loss (docs/spec.md §2)
PROXY_LOGITS = {"ClusterLoss": (0.05, False), "NormSoftmaxLoss": (0.05, False), "ProxyNCAPPLoss": (1 / 9, True)}


def test_proxy_logits_cover_the_single_level_proxy_losses() -> None:
    assert set(PROXY_LOGITS) == PROXY_LOSSES - {"HAPPIERLoss", "CSLLoss"}


@pytest.mark.parametrize("name", sorted(PROXY_LOGITS))
def test_proxy_losses_need_no_positive_pair(name: str) -> None:
    """A single-level proxy loss compares each item with its class proxy: no in-batch positive is needed (HAPPIER's
    H-AP term needs one; CSL needs one margin per label column). Its value is the oracle's cross-entropy."""
    torch.manual_seed(0)
    loss_fn = REGISTRY[name]().double()
    emb, labels = _emb(6).double(), torch.arange(6)
    temperature, squared = PROXY_LOGITS[name]
    expected = oracle.proxy_softmax(emb, labels, loss_fn.proxies.detach(), temperature, squared_distance=squared)
    torch.testing.assert_close(loss_fn(emb, labels), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    ("make", "arg"),
    [
        ("SmoothAPLoss", {"tau": 0.0}),
        ("SupAPLoss", {"rho": -1.0}),
        ("SupAPLoss", {"delta": float("nan")}),
        ("SupAPLoss", {"chunk_size": 0}),
        ("CalibrationLoss", {"alpha": 0.5, "beta": 0.6}),
        ("CalibrationLoss", {"alpha": 2.0}),
        ("ROADMAPLoss", {"lam": 1.5}),
        ("SoftBinAPLoss", {"num_bins": 1}),
    ],
)
def test_bad_hyper_parameters(make: str, arg: dict) -> None:
    with pytest.raises(ValueError, match=f"`{list(arg)[-1]}`"):
        getattr(ranklit.losses, make)(**arg)
