"""2-process DDP on CPU (gloo) with B rows per rank equals one process with 2B: loss and parameter gradients.

Covers the gather with gradients (docs/spec.md §3: no extra world-size factor), multistage backprop under DDP (DDP's own
sync off, gradients averaged once) and the cross-batch memory fed with the gathered batch.
"""

from __future__ import annotations

import pytest
import torch
import torch.multiprocessing as mp

from tests.ddp import free_port
from tests.training import ddp_worker


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    out = tmp_path_factory.mktemp("ddp") / "result"
    mp.spawn(ddp_worker.run, args=(2, free_port(), str(out)), nprocs=2, join=True)
    return [torch.load(f"{out}.{rank}") for rank in range(2)]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("scenario", ["plain", "multistage", "memory"])
@pytest.mark.parametrize("loss", sorted(ddp_worker.LOSSES))
def test_two_processes_equal_one_process_with_the_global_batch(ranks: list[dict], loss: str, scenario: str) -> None:
    expected_loss, expected_grads = ddp_worker.single_process(loss)[scenario]
    losses = [rank[loss][scenario][0] for rank in ranks]
    assert sum(losses) / 2 == pytest.approx(expected_loss, abs=1e-10)
    assert losses[0] != pytest.approx(losses[1], abs=1e-6)  # the ranks really held different queries
    for rank in ranks:
        for grad, expected in zip(rank[loss][scenario][1], expected_grads, strict=True):
            torch.testing.assert_close(grad, expected, rtol=1e-9, atol=1e-10)


@pytest.mark.timeout(180)
def test_gather_of_uneven_batches_returns_every_row_and_sums_the_gradients(ranks: list[dict]) -> None:
    rows = torch.cat([torch.arange(r + 2, dtype=torch.float64)[:, None].repeat(1, 3) + 10 * r for r in range(2)])
    for rank in ranks:
        gathered, grad = rank["uneven"]
        torch.testing.assert_close(gathered, rows)
        # rank r's loss is (r + 1) * sum(gathered): every row receives 1 + 2 from the two losses
        torch.testing.assert_close(grad, torch.full_like(grad, 3.0))
