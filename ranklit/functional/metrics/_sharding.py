"""Splitting an evaluation across processes: which share a process computes, and how the shares are combined.

Under DDP, ``RetrievalMetrics`` gathers every embedding on every process; without sharding each process would then
run the whole ``N x N`` evaluation, ``W`` processes doing the same work ``W`` times. A :class:`QueryShard` tells
:func:`ranklit.functional.metrics._retrieval.retrieval_metric_tensors` which share to compute (process ``rank`` of
``world_size``) and how to sum the shares' results across processes (``all_reduce_sum``). It is pure torch: the
collectives are :mod:`torch.distributed` calls on a process group, and :func:`local_shard` gives a single-process
stand-in for tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

__all__ = ["QueryShard", "distributed_shard", "local_shard"]


@dataclass(frozen=True)
class QueryShard:
    """Process ``rank`` of ``world_size`` computes its share; ``reduce(tensor, op)`` combines the shares in place.

    Attributes:
        rank: this process's index in ``0 .. world_size - 1``.
        world_size: number of processes sharing the evaluation.
        reduce: ``reduce(tensor, op)`` all-reduces ``tensor`` in place with ``op`` ``"sum"`` or ``"min"`` and
            returns it; every process must call it with tensors of the same shape and dtype.
    """

    rank: int
    world_size: int
    reduce: Callable[[Tensor, str], Tensor]

    def __post_init__(self) -> None:
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"`rank` must lie in [0, world_size = {self.world_size}), got {self.rank}.")

    def all_reduce_sum(self, tensor: Tensor) -> Tensor:
        """The element-wise sum of ``tensor`` over the processes."""
        return self.reduce(tensor, "sum")

    def agree_min(self, value: int) -> int:
        """The smallest of the processes' ``value`` (a tile or chunk size every process must use)."""
        return int(self.reduce(torch.tensor([value], dtype=torch.int64), "min")[0])


def distributed_shard(process_group: Any = None) -> QueryShard | None:
    """The shard of this process in ``process_group`` (default: the world), or ``None`` outside DDP / alone.

    Collectives run on the current CUDA device with NCCL, on CPU otherwise (wherever the states are, e.g. with
    ``compute_on_cpu=True``).
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    world_size = dist.get_world_size(process_group)
    if world_size < 2:
        return None
    ops = {"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN}
    backend = str(dist.get_backend(process_group)).lower()
    device = torch.device("cuda", torch.cuda.current_device()) if "nccl" in backend else torch.device("cpu")

    def reduce(tensor: Tensor, op: str) -> Tensor:
        moved = tensor.to(device)
        dist.all_reduce(moved, op=ops[op], group=process_group)
        tensor.copy_(moved)
        return tensor

    return QueryShard(dist.get_rank(process_group), world_size, reduce)


def local_shard(rank: int, world_size: int) -> QueryShard:
    """A shard whose reductions do nothing: evaluates share ``rank`` alone (tests add the shares themselves).

    >>> local_shard(1, 3).agree_min(7)
    7
    """
    return QueryShard(rank, world_size, lambda tensor, op: tensor)
