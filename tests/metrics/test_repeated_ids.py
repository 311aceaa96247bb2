"""An id added twice: DistributedSampler's padding (same sample, same label) is kept once, a clash is refused."""

from __future__ import annotations

import pytest
import torch

from ranklit.metrics import RetrievalMetrics


def _metric_after(extra_label: int) -> RetrievalMetrics:
    torch.manual_seed(0)
    metric = RetrievalMetrics(recall_at=(1,))
    embeddings = torch.randn(6, 4)
    metric.update(embeddings, torch.tensor([0, 0, 1, 1, 2, 2]), ids=torch.arange(6))
    metric.update(embeddings[3:4], torch.tensor([extra_label]), ids=torch.tensor([3]))  # id 3 again
    return metric


def test_a_padded_repeat_counts_once() -> None:
    single = RetrievalMetrics(recall_at=(1,))
    torch.manual_seed(0)
    embeddings = torch.randn(6, 4)
    single.update(embeddings, torch.tensor([0, 0, 1, 1, 2, 2]), ids=torch.arange(6))
    repeated = _metric_after(extra_label=1).compute()
    assert repeated["num_queries"] == 6 and repeated["map"] == single.compute()["map"]


def test_an_id_with_two_labels_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"id 3 was added twice with different labels \(1 and 0\)"):
        _metric_after(extra_label=0).compute()
