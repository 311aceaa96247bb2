"""Retrieval metrics as torchmetrics ``Metric`` classes (no Lightning import)."""
