"""Worker of the 2-process DDP test (a module of its own so that spawned processes can import it)."""

from __future__ import annotations

import json

import torch
import torch.distributed as dist

from ranklit.metrics import RetrievalMetrics
from tests.ddp import init_gloo


def problem() -> tuple[torch.Tensor, torch.Tensor]:
    """37 items, 2-level labels."""
    g = torch.Generator().manual_seed(0)
    e = torch.nn.functional.normalize(torch.randn(37, 5, generator=g), dim=1)
    fine = torch.randint(0, 9, (37,), generator=g)
    return e, torch.stack([fine, fine // 3], 1)


def shards(world_size: int) -> list[torch.Tensor]:
    """Uneven shards of the ids, the last one padded with repeated samples as DistributedSampler does."""
    ids = torch.randperm(37, generator=torch.Generator().manual_seed(1))
    return [ids[:21], torch.cat([ids[21:], ids[:3]])] if world_size == 2 else [ids]


def run(rank: int, world_size: int, port: int, out_path: str) -> None:
    init_gloo(rank, world_size, port)
    try:
        e, labels = problem()
        mine = shards(world_size)[rank]
        metric = RetrievalMetrics(recall_at=(1, 4))
        flat = RetrievalMetrics(recall_at=(1, 4), ties="average", chunk_size=8)  # symmetric path, tiles of 8+
        for batch in mine.split(6):  # several updates of uneven sizes per process
            metric.update(e[batch], labels[batch], batch)
            flat.update(e[batch], labels[batch, 0], batch)
        result = metric.compute()
        result.update({f"flat_{key}": value for key, value in flat.compute().items()})
        if rank == 0:
            with open(out_path, "w") as f:
                json.dump({key: float(value).hex() for key, value in result.items()}, f)
    finally:
        dist.destroy_process_group()
