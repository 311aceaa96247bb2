"""The exact-metric engine's entry points that the packages above :mod:`ranklit.functional` build on: the
torchmetrics classes (:mod:`ranklit.metrics`) and the Revisited metric (:mod:`ranklit.landmarks`). Its machinery
stays internal (``_metrics``, ``_positive_ranks``, ``_sharding``, ...); this module is the one door to it.

- :func:`retrieval_metric_tensors` — the metrics of a retrieval set as 0-dim tensors (what ``retrieval_metrics``
  returns as floats); :func:`nan_metrics` — the same keys, NaN, for a set with no query.
- :func:`check_recall_at`, :func:`check_cutoffs`, :func:`check_average` — the options' checks, run when a metric
  class is built.
- :func:`metrics_chunk_size` — how many queries are ranked at a time, from the free memory.
- :func:`positive_counts` — each positive's rank among the items and among the positives (the counts every binary
  metric follows from).
- :func:`distributed_shard` — which queries this process evaluates under DDP.
"""

from ranklit.functional.metrics._positive_ranks import positive_counts
from ranklit.functional.metrics._retrieval import (
    check_average,
    check_cutoffs,
    check_recall_at,
    metrics_chunk_size,
    nan_metrics,
    retrieval_metric_tensors,
)
from ranklit.functional.metrics._sharding import distributed_shard

__all__ = [
    "check_average",
    "check_cutoffs",
    "check_recall_at",
    "distributed_shard",
    "metrics_chunk_size",
    "nan_metrics",
    "positive_counts",
    "retrieval_metric_tensors",
]
