"""SmoothAP, SupAP, calibration and ROADMAP against the float64 oracles, plus their properties."""

from __future__ import annotations

import pytest
import torch
from torch.nn.functional import normalize

from ranklit.losses import CalibrationLoss, ROADMAPLoss, SmoothAPLoss, SupAPLoss
from tests.losses.cases import CASES, grads, make_case, oracle_args
from tests.oracles import losses as oracle

LOSSES = {
    "smooth_ap": (lambda: SmoothAPLoss(chunk_size=2), oracle.smooth_ap),
    "supap": (lambda: SupAPLoss(chunk_size=3), oracle.supap),
    "supap_tau": (
        lambda: SupAPLoss(tau=0.1, rho=10.0, delta=0.2),
        lambda *a: oracle.supap(*a, tau=0.1, rho=10.0, delta=0.2),
    ),
    "calibration": (CalibrationLoss, oracle.calibration),
    "calibration_active": (
        lambda: CalibrationLoss(reduction="batch_active"),
        lambda *a: oracle.calibration(*a, reduction="batch_active"),
    ),
    "roadmap": (ROADMAPLoss, oracle.roadmap),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_oracle(name: str, case: str, seed: int) -> None:
    make_loss, reference = LOSSES[name]
    args, kwargs = make_case(case, seed)
    loss = make_loss()(**args, **kwargs)
    expected = reference(*oracle_args(args, kwargs))
    assert loss.dtype == torch.float64
    torch.testing.assert_close(loss, expected, rtol=1e-9, atol=1e-12)
    for got, want in zip(grads(loss, args, kwargs), grads(expected, args, kwargs), strict=False):
        torch.testing.assert_close(got, want, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("seed", range(5))
def test_supap_upper_bounds_one_minus_ap(seed: int) -> None:
    torch.manual_seed(seed)
    emb = normalize(torch.randn(24, 3, dtype=torch.float64), dim=1)
    labels = torch.randint(0, 5, (24,))
    loss = SupAPLoss()(emb, labels)
    assert loss >= 1.0 - oracle.average_precision(emb, labels) - 1e-12


def test_gradcheck_supap_and_smooth_ap() -> None:
    torch.manual_seed(0)
    emb = normalize(torch.randn(6, 3, dtype=torch.float64), dim=1).requires_grad_()
    labels = torch.tensor([0, 0, 1, 1, 1, 2])
    for loss in (SupAPLoss(tau=0.5, delta=0.5, rho=2.0), SmoothAPLoss(tau=0.5, chunk_size=2), ROADMAPLoss(tau=0.5)):
        assert torch.autograd.gradcheck(lambda e, loss=loss: loss(e, labels), (emb,))


def test_exact_parts_carry_no_gradient() -> None:
    # Two positives and no negative: SupAP is exactly 0 whatever the scores, so no gradient at all.
    emb = normalize(torch.randn(2, 3, dtype=torch.float64), dim=1).requires_grad_()
    loss = SupAPLoss()(emb, torch.tensor([0, 0]))
    (grad,) = torch.autograd.grad(loss, emb, allow_unused=True)
    assert loss.item() == 0.0 and (grad is None or torch.count_nonzero(grad) == 0)
