"""Worker of the 2-process DDP equivalence tests (its own module so that spawned processes can import it).

Every scenario is also computed by :func:`single_process` on one process holding the global batch; the test compares
the losses (mean over ranks) and the DDP-averaged parameter gradients.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from ranklit.losses import HAPLoss, ROADMAPLoss
from ranklit.training import (
    CrossBatchMemory,
    average_gradients,
    gather_with_grad,
    multistage_backward,
    ranking_objective,
)
from tests.ddp import init_gloo

PER_RANK = 8
LOSSES = {"roadmap": ROADMAPLoss, "hap": HAPLoss}


class Net(nn.Module):
    """A float64 MLP with L2-normalised output (no batch-norm: the rows are independent)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layers = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 5)).double()

    def forward(self, x: Tensor) -> Tensor:
        return nn.functional.normalize(self.layers(x), dim=1)


def global_batches(world_size: int) -> list[dict[str, Tensor]]:
    """Two global batches of 4 classes x 4 (P x K), hierarchical labels [N, 2], global ids; rows shuffled."""
    g = torch.Generator().manual_seed(1)
    batches = []
    for step in range(2):
        fine = torch.arange(4 * PER_RANK * world_size // 4) // 4 + 4 * step
        order = torch.randperm(fine.shape[0], generator=g)
        batches.append(
            {
                "x": torch.randn(fine.shape[0], 6, generator=g, dtype=torch.float64),
                "labels": torch.stack([fine, fine // 2], 1)[order],
                "ids": (torch.arange(fine.shape[0]) + 100 * step)[order],
            }
        )
    return batches


def _local(batch: dict[str, Tensor], rank: int) -> dict[str, Tensor]:
    return {k: v[rank * PER_RANK : (rank + 1) * PER_RANK] for k, v in batch.items()}


def _grads(net: nn.Module) -> list[Tensor]:
    return [p.grad.detach().clone() for p in net.parameters()]


def plain(net: nn.Module, batches: list[dict[str, Tensor]], loss: nn.Module) -> tuple[float, list[Tensor]]:
    """Loss and gradients of plain backprop on the first batch."""
    batch = batches[0]
    net.zero_grad()
    value = ranking_objective(loss, net(batch["x"]), batch["labels"], batch["ids"]).loss
    value.backward()
    return float(value.detach()), _grads(net)


def multistage(net: nn.Module, batches: list[dict[str, Tensor]], loss: nn.Module) -> tuple[float, list[Tensor]]:
    """Loss and gradients of multistage backprop (chunks of 3) on the first batch, averaged over the ranks."""
    batch = batches[0]
    net.zero_grad()
    objective = lambda e: ranking_objective(loss, e, batch["labels"], batch["ids"]).loss  # noqa: E731
    value, _ = multistage_backward(net, batch["x"], objective, chunk_size=3)
    average_gradients(net.parameters())
    return float(value.detach()), _grads(net)


def memory(net: nn.Module, batches: list[dict[str, Tensor]], loss: nn.Module) -> tuple[float, list[Tensor]]:
    """Loss and gradients of the second batch, ranked against a memory holding the first."""
    bank = CrossBatchMemory(size=24)
    for batch in batches:
        net.zero_grad()
        value = ranking_objective(loss, net(batch["x"]), batch["labels"], batch["ids"], memory=bank).loss
        value.backward()
    return float(value.detach()), _grads(net)


def single_process(loss_name: str) -> dict[str, tuple[float, list[Tensor]]]:
    """Every scenario on one process holding the global batches."""
    batches, loss = global_batches(2), LOSSES[loss_name]()
    return {f.__name__: f(Net(), batches, loss) for f in (plain, multistage, memory)}


def run(rank: int, world_size: int, port: int, out_path: str) -> None:
    init_gloo(rank, world_size, port)
    try:
        results: dict[str, object] = {}
        batches = [_local(b, rank) for b in global_batches(world_size)]
        for name, loss_cls in LOSSES.items():
            ddp = DistributedDataParallel(Net())
            found = {"plain": plain(ddp, batches, loss_cls()), "memory": memory(ddp, batches, loss_cls())}
            ddp.require_backward_grad_sync = False  # as ranklit.training._manual.prepare_ddp does
            found["multistage"] = multistage(ddp, batches, loss_cls())
            results[name] = found
        # uneven sizes: rank r holds r + 2 rows; the gather's backward sums what every rank's loss sends back
        rows = torch.arange(rank + 2, dtype=torch.float64)[:, None].repeat(1, 3) + 10 * rank
        rows.requires_grad_(True)
        gathered = gather_with_grad(rows)
        (gathered * (rank + 1)).sum().backward()
        results["uneven"] = (gathered.detach(), rows.grad)
        torch.save(results, f"{out_path}.{rank}")
    finally:
        dist.destroy_process_group()
