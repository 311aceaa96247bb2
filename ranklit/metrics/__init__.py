"""Retrieval metrics as torchmetrics ``Metric`` classes (no Lightning import)."""

from ranklit.metrics.decomposability import DecomposabilityGap, decomposability_gap
from ranklit.metrics.retrieval import RetrievalMetrics
from ranklit.metrics.revisited import RevisitedMetrics

__all__ = ["DecomposabilityGap", "RetrievalMetrics", "RevisitedMetrics", "decomposability_gap"]
