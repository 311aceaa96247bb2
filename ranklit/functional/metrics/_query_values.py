"""The per-query values of an evaluation, and their means over queries or classes ([spec §1][spec-metrics]).

:func:`ranklit.functional.metrics._retrieval.retrieval_metric_tensors` stores the value of every metric for every query
in one ``[K, Q]`` float64 table (``K`` keys: the metrics and the ``has_positive`` flags of each label column). Every
query's value is written by exactly one process, so under DDP the table is completed by one all-reduce of sums of one
value and zeros (exact), and the means, computed from the same table by every process, are bit for bit those of one
process. Memory: ``8 K Q`` bytes.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ranklit.functional.metrics._sharding import QueryShard

__all__ = ["QueryValues"]


class QueryValues:
    """A ``[K, Q]`` table of per-query values, ``0`` until written.

    Args:
        keys: the ``K`` row names; ``has_positive{suffix}`` rows flag the queries that have a positive.
        num_queries: ``Q``.
        device: where the table lives.

    Example:
        >>> table = QueryValues(["has_positive", "map"], 3, torch.device("cpu"))
        >>> table.store({"has_positive": torch.tensor([True, False, True]), "map": torch.tensor([0.5, 0.0, 1.0])},
        ...             torch.tensor([2, 0, 1]))
        >>> table.mean("map", "has_positive").item(), table.per_query("map", "has_positive").tolist()
        (0.75, [nan, 1.0, 0.5])
    """

    def __init__(self, keys: list[str], num_queries: int, device: torch.device | None) -> None:
        self.index = {key: i for i, key in enumerate(keys)}
        self.table = torch.zeros(len(keys), num_queries, dtype=torch.float64, device=device)

    def store(self, values: dict[str, Tensor], rows: Tensor, suffix: str = "") -> None:
        """Write the ``[C]`` values of the queries ``rows`` (positions in ``0..Q-1``) under ``key + suffix``."""
        for key, value in values.items():
            self.table[self.index[f"{key}{suffix}"], rows] = value.to(torch.float64)

    def all_reduce(self, shard: QueryShard) -> None:
        """Complete the table with the rows the other processes wrote (each query written by one process)."""
        self.table = shard.all_reduce_sum(self.table)

    def count(self, flag: str) -> Tensor:
        """Number of queries whose ``flag`` row is set, as a 0-dim float64 tensor."""
        return self.table[self.index[flag]].sum()

    def per_query(self, key: str, flag: str) -> Tensor:
        """``[Q]`` values of ``key``, NaN where ``flag`` is not set."""
        return torch.where(self.table[self.index[flag]] > 0, self.table[self.index[key]], float("nan"))

    def mean(self, key: str, flag: str, classes: Tensor | None = None) -> Tensor:
        """Mean of ``key`` over the queries whose ``flag`` is set (NaN when none).

        With ``classes`` (``[Q]`` integer labels), the mean over the classes of the per-class means
        (pytorch-metric-learning's ``avg_of_avgs``).
        """
        keep = self.table[self.index[flag]] > 0
        values = self.table[self.index[key]][keep]
        if classes is None:
            return values.sum() / keep.sum().to(torch.float64)
        _, inverse = torch.unique(classes[keep], return_inverse=True)
        num_classes = int(inverse.max()) + 1 if inverse.numel() else 0
        sums = values.new_zeros(num_classes).index_add_(0, inverse, values)
        counts = values.new_zeros(num_classes).index_add_(0, inverse, torch.ones_like(values))
        return (sums / counts).sum() / torch.tensor(float(num_classes), dtype=torch.float64, device=values.device)
