"""Retrieval metrics as torchmetrics ``Metric`` classes (no Lightning import)."""

from ranklit.metrics.retrieval import RetrievalMetrics
from ranklit.metrics.decomposability import DecomposabilityGap, decomposability_gap
