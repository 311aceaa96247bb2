"""The warning when a large share of the scores tie (issue 40; docs/spec.md §0, Ranks and ties): once per evaluation,
with the figures of the three policies, and the values unchanged."""

from __future__ import annotations

import re
import warnings

import pytest
import torch

from ranklit.functional import retrieval_metrics
from ranklit.functional.metrics._tie_share import MIN_SAMPLE_QUERIES, sample_queries, tied_counts
from ranklit.functional.ties import TIES, TiedScoresWarning
from ranklit.metrics import RetrievalMetrics
from tests.oracles.metrics import oracle_retrieval_metrics


def _third_collapsed(n: int = 24, levels: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` float64 embeddings of 6 classes, a third of them (every class represented) one identical embedding."""
    g = torch.Generator().manual_seed(0)
    embeddings = torch.randn(n, 8, generator=g, dtype=torch.float64)
    embeddings[::3] = embeddings[0]
    fine = torch.arange(n) % 6
    return embeddings, fine if levels == 1 else torch.stack([fine, fine // 2], 1)


def _tie_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, TiedScoresWarning)]


@pytest.mark.parametrize("levels", [1, 2])
def test_a_third_identical_warns_once_and_values_are_unchanged(levels: int) -> None:
    embeddings, labels = _third_collapsed(n=12, levels=levels)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = retrieval_metrics(embeddings, labels, recall_at=(1, 2))
    messages = _tie_warnings(caught)
    assert len(messages) == 1, messages
    assert "ties='pessimistic'" in messages[0] and "pessimistic / average / optimistic" in messages[0]
    expected = oracle_retrieval_metrics(embeddings, labels, recall_at=(1, 2))
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
    # every query is sampled here (12 <= MIN_SAMPLE_QUERIES): the figures are the three policies' own values (those of
    # "average" and "optimistic" checked against brute force in test_ties.py)
    assert embeddings.shape[0] <= MIN_SAMPLE_QUERIES
    shown = re.search(r"map_at_r ([0-9.]+) / ([0-9.]+) / ([0-9.]+)", messages[0])
    assert shown is not None, messages[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TiedScoresWarning)
        values = [retrieval_metrics(embeddings, labels, recall_at=(1, 2), ties=policy)["map_at_r"] for policy in TIES]
    assert values[0] < values[2]
    for policy, figure, value in zip(TIES, shown.groups(), values, strict=True):
        assert float(figure) == pytest.approx(value, abs=5e-4), policy
    if levels > 1:
        assert "hap " in messages[0] and "asi " in messages[0]


def test_the_torchmetrics_class_warns_once_per_compute() -> None:
    embeddings, labels = _third_collapsed(n=300)  # more queries than the sample
    metric = RetrievalMetrics(recall_at=(1,))
    for batch in torch.arange(300).split(64):
        metric.update(embeddings[batch], labels[batch], batch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        metric.compute()
    messages = _tie_warnings(caught)
    sampled = sample_queries(300, torch.device("cpu")).numel()
    assert len(messages) == 1 and f"over {sampled} evenly spaced queries" in messages[0], messages


def test_no_warning_without_ties_or_when_ties_change_nothing() -> None:
    g = torch.Generator().manual_seed(1)
    embeddings, labels = torch.randn(40, 8, generator=g), torch.arange(40) % 5
    # duplicates inside one class only: ties between positives, which no policy orders differently
    collapsed = embeddings.clone()
    collapsed[labels == 0] = collapsed[0].clone()
    for case in (embeddings, collapsed):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            retrieval_metrics(case, labels)
        assert not _tie_warnings(caught)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_tied_counts_equal_a_count_by_pairs(dtype: torch.dtype) -> None:
    """The sorted-neighbour count (in place, through NumPy on the CPU) against every pair of a row compared."""
    g = torch.Generator().manual_seed(3)
    for rows, width in ((5, 40), (3, 1), (1, 2), (4, 7)):
        scores = torch.randint(0, 6, (rows, width), generator=g).to(dtype) / 4
        scores[torch.rand(rows, width, generator=g) < 0.2] = float("-inf")
        finite = torch.isfinite(scores)
        tied = sum(
            1
            for i in range(rows)
            for j in range(width)
            if finite[i, j] and any(scores[i, k] == scores[i, j] for k in range(width) if k != j)
        )
        assert tied_counts(scores.clone()) == (tied, int(finite.sum()))
