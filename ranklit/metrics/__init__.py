"""Retrieval metrics as torchmetrics ``Metric`` classes (no Lightning import)."""

from ranklit.metrics._decomposability import DecomposabilityGap, decomposability_gap
from ranklit.metrics._retrieval import RetrievalMetrics

__all__ = ["DecomposabilityGap", "RetrievalMetrics", "decomposability_gap"]
