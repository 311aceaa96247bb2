"""FastAP and SoftBin AP against the float64 oracles, and the FastAP(K) = SoftBin(K + 1) identity."""

from __future__ import annotations

import pytest
import torch
from torch.nn.functional import normalize

from ranklit.functional import fastap_loss, softbin_ap_loss
from ranklit.losses import FastAPLoss, SoftBinAPLoss
from tests.losses.cases import CASES, grads, make_case, oracle_args
from tests.oracles import losses as oracle

LOSSES = {
    "fastap": (lambda: FastAPLoss(), oracle.fastap),
    "fastap_3": (lambda: FastAPLoss(num_bins=3), lambda *a: oracle.fastap(*a, num_bins=3)),
    "softbin": (lambda: SoftBinAPLoss(), oracle.softbin),
    "softbin_tie": (lambda: SoftBinAPLoss(tie_aware=True), lambda *a: oracle.softbin(*a, tie_aware=True)),
    "softbin_balanced": (
        lambda: SoftBinAPLoss(num_bins=7, reducer="class_balanced"),
        lambda *a: oracle.softbin(*a, num_bins=7, class_balanced=True),
    ),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_matches_oracle(name: str, case: str) -> None:
    make_loss, reference = LOSSES[name]
    args, kwargs = make_case(case, seed=3)
    loss = make_loss()(**args, **kwargs)
    expected = reference(*oracle_args(args, kwargs))
    torch.testing.assert_close(loss, expected, rtol=1e-9, atol=1e-12)
    for got, want in zip(grads(loss, args, kwargs), grads(expected, args, kwargs), strict=False):
        torch.testing.assert_close(got, want, rtol=1e-7, atol=1e-10)


def test_class_balanced_differs_from_plain_mean() -> None:
    args, _kwargs = make_case("flat", seed=3)
    plain = SoftBinAPLoss(reducer="mean")(**args)
    balanced = SoftBinAPLoss(reducer="class_balanced")(**args)
    assert not torch.isclose(plain, balanced)


@pytest.mark.parametrize("num_bins", [4, 10])
def test_fastap_equals_softbin_with_one_more_bin(num_bins: int) -> None:
    # Scores kept away from the edge bins (|s| < 1 - 2/K): the two losses are the same function there.
    torch.manual_seed(num_bins)
    edge = 2.0 / num_bins
    scores = (torch.rand(10, 15, dtype=torch.float64) * 2 - 1) * (1 - edge)
    scores.requires_grad_()
    positives = torch.rand(10, 15) < 0.3
    positives[:, 0] = True
    fast = fastap_loss(scores, positives, num_bins=num_bins)
    soft = softbin_ap_loss(scores, positives, num_bins=num_bins + 1)
    torch.testing.assert_close(fast, soft)
    torch.testing.assert_close(*[torch.autograd.grad(v, scores)[0] for v in (fast, soft)])


def test_gradcheck() -> None:
    torch.manual_seed(0)
    emb = normalize(torch.randn(6, 3, dtype=torch.float64), dim=1).requires_grad_()
    labels = torch.tensor([0, 0, 1, 1, 1, 2])
    for loss in (FastAPLoss(num_bins=4), SoftBinAPLoss(num_bins=5, tie_aware=True, reducer="class_balanced")):
        assert torch.autograd.gradcheck(lambda e, loss=loss: loss(e, labels), (emb,))


@pytest.mark.parametrize("bad", [{"num_bins": 0}, {"num_bins": 2.5}])
def test_fastap_rejects_bad_parameters(bad: dict) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        FastAPLoss(**bad)


def test_softbin_rejects_one_bin() -> None:
    with pytest.raises(ValueError, match="num_bins"):
        SoftBinAPLoss(num_bins=1)


def test_scores_beyond_the_end_centres_use_the_triangular_kernel() -> None:
    # Rounding can put a cosine slightly outside [-1, 1]: only the end bin gets (1 - distance / width)_+.
    scores = torch.tensor([[1.03, 0.2, -1.02, 0.95, -0.4], [0.1, 1.2, -1.5, 0.3, 0.99]], dtype=torch.float64)
    scores.requires_grad_()
    positives = torch.tensor([[True, False, True, False, True], [False, True, False, True, False]])
    loss = softbin_ap_loss(scores, positives, num_bins=5)
    centres = [1.0 - 0.5 * m for m in range(5)]
    aps = []
    for q in range(2):
        pos, neg = positives[q].nonzero().flatten().tolist(), (~positives[q]).nonzero().flatten().tolist()
        aps.append(oracle.binned_ap_one_query(scores[q], pos, neg, centres, 0.5))
    expected = 1.0 - (aps[0] + aps[1]) / 2
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(torch.autograd.grad(loss, scores)[0], torch.autograd.grad(expected, scores)[0])
