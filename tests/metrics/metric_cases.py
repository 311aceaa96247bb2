"""One case per registered metric class (``ranklit.metrics.list_metrics()``), for the contract test: how to build
it, the batches a run feeds it, and what its pure function gives on them. A new metric class adds its case here
(CONTRIBUTING "Adding a metric"); a registered class without one fails ``test_every_registered_metric_has_a_case``.

Everything is built from one seeded problem: 24 items, 2-level labels, ids, in batches of uneven sizes that the
2-process run splits between its processes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric

from ranklit.functional import retrieval_metrics
from ranklit.landmarks import revisited_map
from ranklit.metrics import DecomposabilityGap, RetrievalMetrics, RevisitedMetrics, decomposability_gap


def problem() -> tuple[Tensor, Tensor, list[Tensor]]:
    """``(embeddings [24, 6] float32, labels [24, 2], batches)``: 6 classes of 4 items, batches of 7, 5, 8 and 4 ids
    with positives in each (a batch AP is defined)."""
    embeddings = torch.randn(24, 6, generator=torch.Generator().manual_seed(0))
    fine = torch.arange(24) % 6
    batches = [[0, 6, 12, 1, 7, 13, 2], [8, 3, 9, 15, 21], [4, 10, 16, 22, 5, 11, 14, 20], [17, 23, 18, 19]]
    return embeddings, torch.stack([fine, fine // 2], 1), [torch.tensor(b) for b in batches]


@dataclass
class Case:
    """``make()`` a fresh metric; ``update(metric, batch)`` feeds it a batch of ids; ``expected(batches)`` is the pure
    function's result over those batches (``dict`` of floats); ``batch_value``: whether ``forward`` gives the pure
    function of the batch alone (``False`` for a metric whose result needs the whole set)."""

    make: Callable[[], Metric]
    update: Callable[[Metric, Tensor, Tensor, Tensor], Any]
    expected: Callable[[Tensor, Tensor, list[Tensor]], dict[str, float]]
    batch_value: bool = True


def _retrieval(e: Tensor, labels: Tensor, batches: list[Tensor]) -> dict[str, float]:
    ids = torch.cat(batches)
    return retrieval_metrics(e[ids], labels[ids], ids=ids, recall_at=(1, 2))


def _gap(e: Tensor, labels: Tensor, batches: list[Tensor]) -> dict[str, float]:
    ids = torch.cat(batches)
    position = torch.empty(int(ids.max()) + 1, dtype=torch.long)
    position[ids] = torch.arange(len(ids))
    normed = torch.nn.functional.normalize(e[ids], dim=1)
    return decomposability_gap(normed, labels[ids], [position[b] for b in batches])


_GND = [
    {"easy": [0, 6], "hard": [12], "junk": [1]},
    {"easy": [3], "hard": [9, 15], "junk": []},
    {"easy": [2, 8, 14], "hard": [], "junk": [4]},
    {"easy": [5], "hard": [11], "junk": [17]},
]


def _benchmarks() -> SimpleNamespace:
    bench = SimpleNamespace(name="toy", queries=range(0, 4), gallery=range(4, 24), gnd=_GND)
    return SimpleNamespace(benchmarks=[bench], whitening_rows=None)


def _revisited_metric() -> Metric:
    metric = RevisitedMetrics(precision_at=(1, 5))
    metric.bind(_benchmarks())
    return metric


def _revisited(e: Tensor, labels: Tensor, batches: list[Tensor]) -> dict[str, float]:
    normed = torch.nn.functional.normalize(e, dim=1)
    values = revisited_map(normed[:4], normed[4:], _GND, precision_at=(1, 5), trapezoid=True)
    return {
        f"toy/{protocol}/{key}": float(values[f"{key}_{protocol}"])
        for protocol in ("easy", "medium", "hard")
        for key in ("map", "mp_at_1", "mp_at_5")
    }


CASES: dict[str, Case] = {
    "RetrievalMetrics": Case(
        lambda: RetrievalMetrics(recall_at=(1, 2)), lambda m, e, y, ids: m.update(e, y, ids), _retrieval
    ),
    "DecomposabilityGap": Case(DecomposabilityGap, lambda m, e, y, ids: m.update(e, y, ids), _gap),
    "RevisitedMetrics": Case(_revisited_metric, lambda m, e, y, ids: m.update(e, ids), _revisited, batch_value=False),
}


def as_floats(result: dict[str, Any]) -> dict[str, float]:
    """A metric's result as python floats (0-dim tensors or floats)."""
    return {key: float(value) for key, value in result.items()}
