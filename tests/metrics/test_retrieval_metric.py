"""`RetrievalMetrics` (torchmetrics) against the functional form."""

from __future__ import annotations

import pytest
import torch

from ranklit.functional import retrieval_metrics
from ranklit.metrics import RetrievalMetrics
from tests.oracles.metrics import oracle_retrieval_metrics


def _problem(n: int = 40, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    e = torch.nn.functional.normalize(torch.randn(n, 6, generator=g, dtype=torch.float64), dim=1)
    fine = torch.randint(0, 10, (n,), generator=g)
    return e, torch.stack([fine, fine // 3], 1)


def test_batches_equal_one_functional_call() -> None:
    e, labels = _problem()
    metric = RetrievalMetrics(recall_at=(1, 5))
    for start in range(0, 40, 13):
        metric.update(e[start : start + 13], labels[start : start + 13], torch.arange(start, min(start + 13, 40)))
    assert metric.compute() == pytest.approx(oracle_retrieval_metrics(e, labels, recall_at=(1, 5)), rel=1e-9)


def test_without_ids_excludes_by_position() -> None:
    e, labels = _problem(seed=1)
    metric = RetrievalMetrics()
    metric.update(e[:25], labels[:25, 0])
    metric.update(e[25:], labels[25:, 0])
    assert metric.compute() == retrieval_metrics(e, labels[:, 0])


def test_repeated_ids_are_deduplicated() -> None:
    e, labels = _problem(seed=2)
    metric = RetrievalMetrics()
    metric.update(e, labels, torch.arange(40))
    metric.update(e[:7], labels[:7], torch.arange(7))  # padded repeats, as DistributedSampler does
    assert metric.compute() == retrieval_metrics(e, labels, ids=torch.arange(40))


def test_per_query_values_follow_the_deduplicated_queries() -> None:
    e, labels = _problem(seed=4)
    order = torch.randperm(40, generator=torch.Generator().manual_seed(0))
    metric = RetrievalMetrics(recall_at=(1, 5))
    metric.update(e[order], labels[order], order)
    metric.update(e[:5], labels[:5], torch.arange(5))  # repeats are dropped
    values = metric.compute_per_query()
    ids = values.pop("ids")
    assert sorted(ids.tolist()) == list(range(40))
    expected = oracle_retrieval_metrics(e[ids], labels[ids], recall_at=(1, 5), per_query=True)
    for key, value in values.items():
        assert torch.allclose(value, torch.as_tensor(expected[key], dtype=value.dtype), rtol=1e-9, equal_nan=True), key
    assert float(metric.compute()["map"]) == pytest.approx(float(values["map"].nanmean()), rel=1e-12)


def test_gallery_mode_ranks_queries_against_the_gallery_only() -> None:
    e, labels = _problem(seed=3)
    metric = RetrievalMetrics(recall_at=(1, 2))
    metric.update(e[:10], labels[:10], torch.arange(10))
    metric.update(e[10:], labels[10:], torch.arange(30), gallery=True)  # ids collide with queries: nothing excluded
    metric.update(e[10:15], labels[10:15], torch.arange(5), gallery=True)  # duplicates within the gallery
    expected = oracle_retrieval_metrics(
        e[:10], labels[:10], ref_embeddings=e[10:], ref_labels=labels[10:], recall_at=(1, 2)
    )
    assert metric.compute() == pytest.approx(expected, rel=1e-9)


def test_reset_and_attributes() -> None:
    metric = RetrievalMetrics(compute_on_cpu=True)
    assert metric.compute_on_cpu and not metric.full_state_update and metric.higher_is_better
    metric.update(*_problem(), torch.arange(40))
    metric.reset()
    metric.update(*_problem(seed=4))  # after reset, calls without ids are allowed again
    assert metric.compute()["num_queries"] == 40


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda m: m.compute(), "before any `update`"),
        (lambda m: m.update(torch.randn(3, 2), torch.zeros(4, dtype=torch.long)), "one label row per embedding"),
        (lambda m: (m.update(torch.randn(3, 2), torch.zeros(3, dtype=torch.long), torch.arange(3)),
                    m.update(torch.randn(3, 2), torch.zeros(3, dtype=torch.long))), "every call or in none"),
    ],
)
def test_errors(call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call(RetrievalMetrics())


def test_bad_options_are_rejected() -> None:
    with pytest.raises(ValueError, match="recall_at"):
        RetrievalMetrics(recall_at=(0, 1))
    with pytest.raises(ValueError, match="chunk_size"):
        RetrievalMetrics(chunk_size=0)
    with pytest.raises(ValueError, match="recal_at"):  # torchmetrics rejects unknown keyword arguments
        RetrievalMetrics(recal_at=(1,))


def test_plot_recall_curve() -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    metric = RetrievalMetrics()
    metric.update(*_problem(), torch.arange(40))
    fig, ax = metric.plot()
    xs, ys = ax.lines[0].get_data()
    assert list(xs) == [1, 2, 4, 8] and all(0 <= y <= 1 for y in ys)
    fig.clf()
