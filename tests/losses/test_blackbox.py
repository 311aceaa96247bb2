"""BlackBox AP: exact value, blackbox gradient against the loop oracle, ranks, margin."""

from __future__ import annotations

import pytest
import torch
from torch.nn.functional import normalize

from ranklit.functional.losses._blackbox import descending_ranks
from ranklit.losses import BlackBoxAPLoss
from tests.losses.cases import CASES, grads, make_case, oracle_args
from tests.oracles import losses as oracle


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("lam", [4.0, 0.5])
def test_matches_oracle_in_eval_mode(case: str, lam: float) -> None:
    args, kwargs = make_case(case, seed=5)
    loss = BlackBoxAPLoss(lam=lam).eval()(**args, **kwargs)
    expected = oracle.blackbox_ap(*oracle_args(args, kwargs), lam=lam)
    torch.testing.assert_close(loss, expected, rtol=1e-12, atol=1e-12)
    assert loss.item() == pytest.approx(1.0 - oracle.average_precision(*oracle_args(args, kwargs)), abs=1e-12)
    for got, want in zip(grads(loss, args, kwargs), grads(expected, args, kwargs), strict=False):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12)
        assert torch.count_nonzero(got) > 0


def test_descending_ranks_count_ties_against_the_item() -> None:
    scores = torch.tensor([[0.5, 0.5, 0.1, 0.9], [0.3, -0.2, 0.3, 0.0]])
    mask = torch.tensor([[True, True, True, True], [True, False, True, True]])
    assert descending_ranks(scores, mask).tolist() == [[3.0, 3.0, 4.0, 1.0], [2.0, 0.0, 2.0, 3.0]]


def test_margin_is_random_in_training_and_off_in_eval() -> None:
    torch.manual_seed(0)
    emb = normalize(torch.randn(16, 8), dim=1)
    labels = torch.arange(8).repeat(2)
    loss = BlackBoxAPLoss(margin=0.5)
    train_values = {round(loss.train()(emb, labels).item(), 6) for _ in range(5)}
    eval_values = {round(loss.eval()(emb, labels).item(), 6) for _ in range(3)}
    assert len(train_values) > 1 and len(eval_values) == 1
    assert min(train_values) >= min(eval_values) - 1e-6  # the margin only makes the ranking harder


@pytest.mark.parametrize("bad", [{"lam": 0.0}, {"lam": -1.0}, {"margin": -0.1}])
def test_rejects_bad_parameters(bad: dict) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        BlackBoxAPLoss(**bad)
