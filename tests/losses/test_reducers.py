"""Reducers (per-query terms -> the loss): against the float64 oracles (values and gradients) for class-balanced
SupAP and per-query Smooth-AP, and every reducer on every loss of the registry that takes one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from torch import Tensor
from torch.nn.functional import normalize

from ranklit.errors import UserError
from ranklit.functional import Reducer, get_reducer, supap_loss
from ranklit.losses import CalibrationLoss, ROADMAPLoss, SmoothAPLoss, SoftBinAPLoss, SupAPLoss
from tests.losses.cases import CASES, grads, make_case, oracle_args
from tests.losses.registry import DIM, REDUCIBLE_LOSSES, REGISTRY
from tests.oracles import losses as oracle

REDUCERS = ("mean", "class_balanced", "active", "none")


def _weighted(values: Tensor, seed: int = 5) -> Tensor:
    """A random linear functional of a ``[Q]`` vector, so that one gradient checks every component."""
    return (values * torch.rand(values.shape, generator=torch.Generator().manual_seed(seed), dtype=values.dtype)).sum()


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_class_balanced_supap_matches_the_oracle(case: str, seed: int) -> None:
    args, kwargs = make_case(case, seed)
    loss = SupAPLoss(reducer="class_balanced", chunk_size=3)(**args, **kwargs)
    expected = oracle.reduce_terms(oracle.supap_terms(*oracle_args(args, kwargs)), "class_balanced")
    torch.testing.assert_close(loss, expected, rtol=1e-9, atol=1e-12)
    for got, want in zip(grads(loss, args, kwargs), grads(expected, args, kwargs), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_per_query_smooth_ap_matches_the_oracle(case: str, seed: int) -> None:
    args, kwargs = make_case(case, seed)
    terms = SmoothAPLoss(reducer="none", chunk_size=2)(**args, **kwargs)
    expected = oracle.reduce_terms(oracle.smooth_ap_terms(*oracle_args(args, kwargs)), "none")
    assert terms.shape == (args["embeddings"].shape[0],)
    torch.testing.assert_close(terms, expected, rtol=1e-9, atol=1e-12)
    if case != "refs":
        assert terms[-1].item() == 0.0  # the last item of the case is alone in its class: no positive
    got, want = grads(_weighted(terms), args, kwargs), grads(_weighted(expected), args, kwargs)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("reducer", ["mean", "class_balanced", "active"])
def test_smooth_ap_reducers_match_the_oracle(reducer: str) -> None:
    args, kwargs = make_case("flat", 3)
    loss = SmoothAPLoss(reducer=reducer)(**args, **kwargs)
    expected = oracle.reduce_terms(oracle.smooth_ap_terms(*oracle_args(args, kwargs)), reducer)
    torch.testing.assert_close(loss, expected, rtol=1e-9, atol=1e-12)


def _batch(seed: int = 0) -> tuple[Tensor, Tensor]:
    """12 items with [12, 2] labels: classes of sizes 3, 3, 2, 2, 1, 1 (two queries without positive)."""
    gen = torch.Generator().manual_seed(seed)
    emb = normalize(torch.randn(12, DIM, generator=gen, dtype=torch.float64), dim=1).requires_grad_()
    fine = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 4, 5])
    return emb, torch.stack([fine, fine // 2], dim=1)


def _make(name: str, reducer: str) -> torch.nn.Module:
    """The registered example ``name`` with ``reducer`` in it and its sub-losses (ROADMAP's terms, HAPPIER's
    clustering term), its other arguments kept."""
    module = REGISTRY[name]()
    for sub in module.modules():
        if hasattr(sub, "reducer"):
            sub.reducer = reducer
    return module.double().eval()


@pytest.mark.parametrize("reducer", REDUCERS)
@pytest.mark.parametrize("name", sorted(REDUCIBLE_LOSSES))
def test_every_reducer_on_every_loss_that_takes_one(name: str, reducer: str) -> None:
    emb, labels = _batch()
    torch.manual_seed(0)
    value = _make(name, reducer)(emb, labels)
    if reducer == "none":
        assert value.shape == (12,)
    else:
        assert value.ndim == 0
    assert torch.isfinite(value).all()
    (grad,) = torch.autograd.grad(value.sum(), emb)
    assert torch.isfinite(grad).all() and grad.abs().sum() > 0


@pytest.mark.parametrize("name", sorted(REDUCIBLE_LOSSES))
def test_reducers_agree_with_the_per_query_terms(name: str) -> None:
    """ "mean", "class_balanced" and "active" are the means, over the queries that count, of the "none" terms."""
    emb, labels = _batch(1)
    torch.manual_seed(0)
    terms = _make(name, "none")(emb, labels).detach()
    values = {}
    for reducer in ("mean", "class_balanced", "active"):
        torch.manual_seed(0)
        values[reducer] = _make(name, reducer)(emb, labels).item()
    if name == "HAPPIERLoss":
        return  # terms over different queries (with a relevant item / all) are added: tested below
    if name.startswith("HAP") or name in {"ClusterLoss", "NormSoftmaxLoss", "ProxyNCAPPLoss"}:
        counted = list(range(12))  # a relevant item at the coarse level for every query; proxies: every query
    else:
        counted = [q for q in range(12) if labels[q, 0] < 4]  # classes 4 and 5 have a single item
    assert all(terms[q] == 0 for q in range(12) if q not in counted)
    assert values["mean"] == pytest.approx(sum(float(terms[q]) for q in counted) / len(counted), rel=1e-12)
    by_class = {}
    for q in counted:
        by_class.setdefault(int(labels[q, 0]), []).append(float(terms[q]))
    balanced = sum(sum(v) / len(v) for v in by_class.values()) / len(by_class)
    assert values["class_balanced"] == pytest.approx(balanced, rel=1e-12)
    active = [float(terms[q]) for q in counted if terms[q] != 0]
    assert values["active"] == pytest.approx(sum(active) / len(active) if active else 0.0, rel=1e-12)


def test_happier_reduces_each_term_then_weights_them() -> None:
    emb, labels = _batch(2)
    loss = _make("HAPPIERLoss", "none")
    terms = loss(emb, labels)
    hap = _make("HAPLoss", "none")(emb, labels)
    cluster = torch.nn.functional.cross_entropy(
        emb @ normalize(loss.cluster.proxies.double(), dim=1).T / 0.05, labels[:, 0], reduction="none"
    )
    torch.testing.assert_close(terms, 0.9 * hap + 0.1 * cluster)


def test_default_reducer_is_the_mean() -> None:
    emb, labels = _batch(3)
    for loss in (SupAPLoss(), SmoothAPLoss(), SoftBinAPLoss()):
        explicit = type(loss)(reducer="mean")(emb, labels)
        torch.testing.assert_close(loss(emb, labels), explicit, rtol=0, atol=0)


def test_a_reducer_object_is_an_extension_point() -> None:
    class Worst(Reducer):
        def reduce(self, terms: Tensor, keep: Tensor, classes: Tensor | None) -> Tensor:
            return torch.where(keep, terms, torch.zeros_like(terms)).max()

    emb, labels = _batch(4)
    worst = SupAPLoss(reducer=Worst())(emb, labels)
    assert worst.item() == pytest.approx(SupAPLoss(reducer="none")(emb, labels).max().item(), rel=1e-12)
    assert "reducer=" in repr(SupAPLoss(reducer=Worst()))


def test_bad_reducers_are_refused_with_the_choices() -> None:
    with pytest.raises(UserError, match=r"`reducer` must be one of \('mean', 'class_balanced', 'active', 'none'\)"):
        SupAPLoss(reducer="median")
    with pytest.raises(UserError, match="query_classes"):
        supap_loss(torch.rand(3, 3), torch.eye(3, dtype=torch.bool), reducer="class_balanced")
    with pytest.raises(UserError, match="batch_active"):
        CalibrationLoss(reduction="batch_active", reducer="none")
    with pytest.raises(UserError, match="batch_active"):
        ROADMAPLoss(calibration_reduction="batch_active", reducer="class_balanced")
    assert get_reducer("none").per_query and not get_reducer("mean").per_query


def test_per_query_loss_of_a_batch_without_positive_for_some_queries() -> None:
    """A query without positive gets 0 and no gradient; the others their own term."""
    emb, labels = _batch(5)
    terms = SupAPLoss(reducer="none")(emb, labels)
    (grad,) = torch.autograd.grad(terms[10] + terms[11], emb)
    assert terms[10].item() == terms[11].item() == 0.0 and torch.count_nonzero(grad) == 0


def test_the_reducer_of_docs_extending_runs() -> None:
    """The example reducer of docs/extending.md: the mean of the worst quarter of the per-query terms."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "extending.md").read_text(encoding="utf-8")
    section = text.split("## A reducer", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert code is not None, "the reducer section of docs/extending.md lost its example"
    names: dict = {}
    exec(code.group(1), names)
    emb, labels = _batch(6)
    terms = SupAPLoss(reducer="none")(emb, labels)[:10]  # queries 10 and 11 have no positive
    expected = terms.topk(10 // 4).values.mean()
    torch.testing.assert_close(SupAPLoss(reducer=names["WorstQuartile"]())(emb, labels), expected)
