"""Retrieval metrics as torchmetrics ``Metric`` classes (no Lightning import).

Each class is declared with ``@register_metric`` (:mod:`ranklit.metrics._registry`): that declaration fills
``__all__`` and :func:`list_metrics`; the binary metrics they compute are declared once in
:data:`ranklit.functional.metrics.binary.BINARY_METRICS` (``list_metrics(keys=True)``).
"""

from ranklit.metrics._decomposability import DecomposabilityGap as DecomposabilityGap
from ranklit.metrics._decomposability import decomposability_gap
from ranklit.metrics._registry import list_metrics, register_metric
from ranklit.metrics._retrieval import RetrievalMetrics as RetrievalMetrics
from ranklit.metrics._revisited import RevisitedMetrics as RevisitedMetrics

__all__ = [*list_metrics(), "decomposability_gap", "list_metrics", "register_metric"]
