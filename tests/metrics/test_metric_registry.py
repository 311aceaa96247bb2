"""One declaration per metric: the classes of ``ranklit.metrics`` and the keys of the binary table."""

from __future__ import annotations

import re

import torch
from torchmetrics import Metric

import ranklit.metrics
from ranklit._public import defined_in
from ranklit.functional import retrieval_metrics
from ranklit.metrics import list_metrics


def test_every_metric_class_is_registered_and_exported() -> None:
    defined = {
        name
        for name, obj in vars(ranklit.metrics).items()
        if isinstance(obj, type) and issubclass(obj, Metric) and defined_in(obj).startswith("ranklit.metrics.")
    }
    assert defined == set(list_metrics())
    assert set(list_metrics()) <= set(ranklit.metrics.__all__)


def test_the_listed_keys_are_what_retrieval_metrics_returns() -> None:
    """Every key of ``list_metrics(keys=True)`` (``{k}`` for each cut-off) is in the result, and every flat key of the
    result is either listed or a count."""
    gen = torch.Generator().manual_seed(0)
    result = retrieval_metrics(torch.randn(12, 4, generator=gen), torch.arange(6).repeat(2), recall_at=(1, 3))
    patterns = [re.compile("^" + key.replace("{k}", r"\d+") + "$") for key in list_metrics(keys=True)]
    assert all(any(p.match(key) for key in result) for p in patterns)
    unlisted = {key for key in result if not any(p.match(key) for p in patterns)}
    assert unlisted == {"num_queries", "num_queries_without_positive"}
