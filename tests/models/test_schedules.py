"""``WarmupCosineLR`` against torch's own ``LinearLR`` (warm-up) and ``CosineAnnealingLR`` (decay)."""

from __future__ import annotations

import pytest
import torch
from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR

from ranklit.models._schedules import WarmupCosineLR


def _optimizer(*rates: float) -> torch.optim.Optimizer:
    groups = [{"params": [torch.nn.Parameter(torch.zeros(1))], "lr": lr} for lr in rates]
    return torch.optim.SGD(groups, lr=rates[0])


def _rates(scheduler: torch.optim.lr_scheduler.LRScheduler, epochs: int) -> list[list[float]]:
    rates = []
    for _ in range(epochs):
        rates.append([group["lr"] for group in scheduler.optimizer.param_groups])
        scheduler.optimizer.step()
        scheduler.step()
    return rates


@pytest.mark.parametrize(("warmup", "total", "min_factor"), [(5, 100, 0.0), (3, 10, 0.1), (1, 4, 0.0), (0, 6, 0.5)])
def test_matches_linear_warmup_then_torch_cosine(warmup: int, total: int, min_factor: float) -> None:
    rates = (1e-5, 2e-5, 10.0)  # backbone, head, proxies: each group keeps its own base rate
    ours = _rates(WarmupCosineLR(_optimizer(*rates), warmup, total, min_factor=min_factor), total + 3)
    if warmup > 1:
        warm = _rates(LinearLR(_optimizer(*rates), start_factor=1 / warmup, end_factor=1.0, total_iters=warmup - 1),
                      warmup)
    else:
        warm = [list(rates)] * warmup
    optimizers = [_optimizer(lr) for lr in rates]
    cosines = [
        CosineAnnealingLR(o, T_max=total - warmup, eta_min=min_factor * lr)
        for o, lr in zip(optimizers, rates, strict=True)
    ]
    decay = list(zip(*(_rates(c, total - warmup + 1) for c in cosines), strict=True))
    expected = [*warm, *([r[0] for r in row] for row in decay)]
    expected += [[min_factor * lr for lr in rates]] * (total + 3 - len(expected))
    assert torch.allclose(torch.tensor(ours, dtype=torch.float64), torch.tensor(expected, dtype=torch.float64),
                          rtol=1e-9, atol=1e-15)


def test_state_dict_resumes_the_schedule() -> None:
    scheduler = WarmupCosineLR(_optimizer(1.0), warmup_epochs=2, max_epochs=8, min_factor=0.25)
    _rates(scheduler, 3)
    state = scheduler.state_dict()
    resumed_optimizer = _optimizer(1.0)
    resumed = WarmupCosineLR(resumed_optimizer, warmup_epochs=1, max_epochs=20)  # other settings, overwritten
    resumed.load_state_dict(state)
    resumed_optimizer.param_groups[0]["lr"] = scheduler.optimizer.param_groups[0]["lr"]
    assert _rates(resumed, 6) == _rates(scheduler, 6)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"warmup_epochs": 5, "max_epochs": 5}, "must exceed `warmup_epochs`"),
        ({"warmup_epochs": -1, "max_epochs": 5}, "`warmup_epochs` must be a non-negative integer"),
        ({"warmup_epochs": 1.5, "max_epochs": 5}, "`warmup_epochs` must be a non-negative integer"),
        ({"warmup_epochs": 1, "max_epochs": 5, "min_factor": 1.5}, r"`min_factor` must be a number in \[0, 1\]"),
    ],
)
def test_invalid_arguments_are_explained(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        WarmupCosineLR(_optimizer(1.0), **kwargs)
