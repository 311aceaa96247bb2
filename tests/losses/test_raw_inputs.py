"""Every loss of the registry on raw (unnormalised) embeddings equals the float64 oracle on the normalised ones, value
and gradient with respect to the raw input (spec §0), plus ``normalize=False``, ``include_self`` and the authors'
calibration average."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import Tensor
from torch.nn.functional import normalize

from ranklit.losses import BlackBoxAPLoss, CalibrationLoss, HAPLoss, ROADMAPLoss, SmoothAPLoss, SupAPLoss
from tests.losses.registry import DIM, NUM_CLASSES, REGISTRY
from tests.oracles import hierarchical_losses as hier
from tests.oracles import losses as oracle
from tests.oracles import raw_oracles

Oracle = Callable[[torch.nn.Module, Tensor, Tensor], Tensor]


# oracle(loss module, unit-norm embeddings (in the autograd graph of the raw ones), [B, 2] labels), by registry name:
# the RAW_ORACLES of every module of tests/oracles (a new loss's oracle file declares its own)
ORACLES: dict[str, Oracle] = raw_oracles()
# distance-weighted mining draws its negatives at random: compared with itself on the normalised input, same seed
SELF_REFERENCED = {"TripletLoss_distance_weighted"}


def _raw_batch(seed: int = 0) -> tuple[Tensor, Tensor]:
    """12 raw float64 rows: unit vectors rescaled by random factors in [0.1, 20]; [12, 2] labels (pairs of a class)."""
    g = torch.Generator().manual_seed(seed)
    unit_rows = normalize(torch.randn(12, DIM, generator=g, dtype=torch.float64), dim=1)
    scales = 10 ** (torch.rand(12, 1, generator=g, dtype=torch.float64) * 2.3 - 1)
    fine = torch.arange(NUM_CLASSES).repeat_interleave(2)
    return (unit_rows * scales).requires_grad_(), torch.stack([fine, fine // 3], dim=1)


def test_every_registered_loss_has_an_oracle() -> None:
    assert set(REGISTRY) == set(ORACLES) | SELF_REFERENCED


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_raw_embeddings_equal_the_oracle_on_normalised_ones(name: str) -> None:
    torch.manual_seed(0)
    loss_fn = REGISTRY[name]().double().eval()  # eval: BlackBox AP without its random margin
    raw, labels = _raw_batch()
    unit_rows = raw / raw.norm(dim=1, keepdim=True)  # the normalisation inside the graph of the raw input
    if name in SELF_REFERENCED:
        torch.manual_seed(1)
        expected = REGISTRY[name]().double().eval()(unit_rows.detach().requires_grad_(), labels)
        torch.manual_seed(1)
        value = loss_fn(raw, labels)
        torch.testing.assert_close(value, expected, rtol=1e-9, atol=1e-12)
        return
    if name == "CSLLoss":
        loss_fn.register_hierarchy(labels)
    value = loss_fn(raw, labels)
    expected = ORACLES[name](loss_fn, unit_rows, labels)
    torch.testing.assert_close(value, expected, rtol=1e-9, atol=1e-12)
    (got,) = torch.autograd.grad(value, raw)
    (want,) = torch.autograd.grad(expected, raw)
    torch.testing.assert_close(got, want, rtol=1e-7, atol=1e-10)
    assert got.abs().sum() > 0


@pytest.mark.parametrize("make", [SupAPLoss, CalibrationLoss, lambda **kw: HAPLoss(**kw)])
def test_normalize_false_uses_raw_dot_products(make) -> None:
    raw, labels = _raw_batch(1)
    scaled = make(normalize=False)(raw, labels)
    assert not torch.allclose(scaled, make()(raw, labels))
    unit_rows = (raw / raw.norm(dim=1, keepdim=True)).detach()
    torch.testing.assert_close(make(normalize=False)(unit_rows, labels), make()(raw, labels), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    ("loss", "reference"),
    [
        (SmoothAPLoss(include_self=True), oracle.smooth_ap),
        (SupAPLoss(include_self=True), oracle.supap),
        (BlackBoxAPLoss(include_self=True).eval(), oracle.blackbox_ap),
        (HAPLoss(include_self=True), lambda e, y, *refs: hier.hap_loss(e, y, ref_embeddings=e, ref_labels=y)),
    ],
)
@pytest.mark.parametrize("hierarchical", [False, True])
def test_include_self_keeps_the_query_as_its_own_positive(loss, reference, hierarchical: bool) -> None:
    """The oracle ranks every query against the whole batch with nothing excluded: the query is in its ranking."""
    raw, labels = _raw_batch(2)
    labels = labels if hierarchical and isinstance(loss, HAPLoss) else labels[:, 0]
    value = loss.double()(raw, labels)
    unit_rows = raw / raw.norm(dim=1, keepdim=True)
    expected = reference(unit_rows, labels, unit_rows, labels, None, None)
    torch.testing.assert_close(value, expected, rtol=1e-9, atol=1e-12)
    (got,) = torch.autograd.grad(value, raw)
    (want,) = torch.autograd.grad(expected, raw)
    torch.testing.assert_close(got, want, rtol=1e-7, atol=1e-10)
    assert value < type(loss)()(raw, labels)  # the query at rank 1 raises every AP


def test_roadmap_authors_option_combines_include_self_and_the_batch_average() -> None:
    raw, labels = _raw_batch(3)
    fine = labels[:, 0]
    unit_rows = raw / raw.norm(dim=1, keepdim=True)
    value = ROADMAPLoss(include_self=True, calibration_reduction="batch_active").double()(raw, fine)
    supap = oracle.supap(unit_rows, fine, unit_rows, fine, None, None)
    calibration = oracle.calibration(unit_rows, fine, reduction="batch_active")  # never pairs q with itself
    torch.testing.assert_close(value, 0.5 * supap + 0.5 * calibration, rtol=1e-9, atol=1e-12)


def _authors_calibration(emb: Tensor, labels: Tensor, alpha: float = 0.9, beta: float = 0.6) -> Tensor:
    """pytorch-metric-learning ``ContrastiveLoss(pos_margin=alpha, neg_margin=beta)`` + ``AvgNonZeroReducer`` on the
    cosine similarities of all ordered pairs ``i != j``, written out in float64."""
    e = emb.double() / emb.double().norm(dim=1, keepdim=True)
    pos_terms, neg_terms = [], []
    for i in range(e.shape[0]):
        for j in range(e.shape[0]):
            if i == j:
                continue
            s = e[i] @ e[j]
            if labels[i] == labels[j]:
                pos_terms.append(torch.clamp(alpha - s, min=0))
            else:
                neg_terms.append(torch.clamp(s - beta, min=0))
    pos = torch.stack(pos_terms)
    neg = torch.stack(neg_terms)
    return pos.sum() / (pos > 0).sum().clamp(min=1) + neg.sum() / (neg > 0).sum().clamp(min=1)


def test_batch_active_calibration_is_the_authors_average() -> None:
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    torch.manual_seed(0)
    emb = normalize(torch.randn(8, 3, dtype=torch.float64), dim=1).requires_grad_()
    value = CalibrationLoss(reduction="batch_active").double()(emb, labels)
    expected = _authors_calibration(emb, labels)
    torch.testing.assert_close(value, expected, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(*(torch.autograd.grad(v, emb)[0] for v in (value, expected)))
    # the figure of issue #14 (D = 3, float64 draws): authors 0.85002, the former per-query "active only" 0.825695
    assert value.item() == pytest.approx(0.85002, abs=1e-5)
    assert CalibrationLoss()(emb, labels).item() != pytest.approx(0.85002, abs=1e-3)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: SupAPLoss()(torch.randn(4, 3), torch.tensor([0.0, 0.0, 1.0, 1.0])), TypeError, "integer class ids"),
        (lambda: SupAPLoss(normalize=1), TypeError, "`normalize` must be True or False"),
        (lambda: SmoothAPLoss(include_self="yes"), TypeError, "`include_self`"),
        (lambda: CalibrationLoss(reduction="mean"), ValueError, "`reduction` must be one of"),
        (lambda: SupAPLoss(chunk_size=True), ValueError, "`chunk_size`"),
    ],
)
def test_invalid_inputs_are_refused(call, error, match: str) -> None:
    with pytest.raises(error, match=match):
        call()
