"""One declaration per metric: :func:`register_metric` next to each ``Metric`` class of :mod:`ranklit.metrics`, and
the table :data:`ranklit.functional.metrics.binary.BINARY_METRICS` for the per-query binary metrics they compute.

From them come ``ranklit.metrics.__all__`` (the classes) and :func:`list_metrics`.
"""

from __future__ import annotations

from typing import TypeVar

from torchmetrics import Metric

from ranklit._public import publish
from ranklit.functional.metrics.binary import BINARY_METRICS

__all__ = ["register_metric", "list_metrics"]

MetricT = TypeVar("MetricT", bound=type[Metric])

_METRICS: dict[str, type[Metric]] = {}


def register_metric(cls: MetricT) -> MetricT:
    """Class decorator recording a ``torchmetrics.Metric`` class of ranklit (its name in :func:`list_metrics` and in
    ``ranklit.metrics.__all__``).

    Example:
        >>> import torch
        >>> from torchmetrics import Metric
        >>> @register_metric
        ... class MeanScore(Metric):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.add_state("total", default=torch.tensor(0.0), dist_reduce_fx="sum")
        ...     def update(self, scores):
        ...         self.total += scores.mean()
        ...     def compute(self):
        ...         return self.total
        >>> [name for name in list_metrics() if name == "MeanScore"], MeanScore()(torch.tensor([1.0, 3.0])).item()
        (['MeanScore'], 2.0)
        >>> _ = _METRICS.pop("MeanScore")  # (keep the doctest from adding a metric)
    """
    _METRICS[cls.__name__] = cls
    return publish(cls, "ranklit.metrics")


def list_metrics(*, keys: bool = False) -> list[str]:
    """The metric classes of ``ranklit.metrics``, sorted; with ``keys=True`` the binary metrics every retrieval
    evaluation computes, as the result keys of :data:`~ranklit.functional.metrics.binary.BINARY_METRICS` (``{k}``:
    one key per cut-off, e.g. ``recall_at_{k}`` gives ``recall_at_1``, ``recall_at_2``, ...), in table order.

    Example:
        >>> list_metrics(keys=True)[:3]
        ['map', 'map_at_r', 'precision_at_1']
        >>> "RetrievalMetrics" in list_metrics()
        True
    """
    if keys:
        return [metric.key for metric in BINARY_METRICS]
    return sorted(_METRICS)
