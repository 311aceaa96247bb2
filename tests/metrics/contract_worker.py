"""Worker of the contract's 2-process DDP run (a module of its own so that spawned processes can import it): every
registered metric, in one process group, fed the batches of its rank (rank 0 the even batches, rank 1 the odd)."""

from __future__ import annotations

import json

import torch.distributed as dist

from ranklit.metrics import list_metrics
from tests.ddp import init_gloo
from tests.metrics.metric_cases import CASES, as_floats, problem


def run(rank: int, world_size: int, port: int, out_path: str) -> None:
    init_gloo(rank, world_size, port)
    try:
        e, labels, batches = problem()
        results = {}
        for name in list_metrics():
            case = CASES[name]
            metric = case.make()
            for ids in batches[rank::world_size]:
                case.update(metric, e[ids], labels[ids], ids)
            results[name] = {key: value.hex() for key, value in as_floats(metric.compute()).items()}
        if rank == 0:
            with open(out_path, "w") as f:
                json.dump(results, f)
    finally:
        dist.destroy_process_group()
