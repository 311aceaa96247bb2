"""`retrieval_metrics` and `RetrievalMetrics` on raw embeddings, the torchmetrics forward/compute conventions, input
checks at `update`, and the sharded evaluation (every share computed in one process, then added)."""

from __future__ import annotations

import math
import threading

import pytest
import torch
from torchmetrics import MetricCollection

from ranklit.functional import retrieval_metrics
from ranklit.functional.metrics import _symmetric_ranks as symmetric_ranks
from ranklit.functional.metrics._retrieval import retrieval_metric_tensors
from ranklit.functional.metrics._sharding import QueryShard
from ranklit.metrics import RetrievalMetrics
from tests.oracles.metrics import oracle_retrieval_metrics


def _raw(n: int = 40, seed: int = 0, levels: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    e = torch.randn(n, 6, generator=g, dtype=torch.float64) * 10 ** (torch.rand(n, 1, generator=g) * 3 - 1)
    fine = torch.randint(0, 10, (n,), generator=g)
    return e, (torch.stack([fine, fine // 3], 1) if levels else fine)


def _close(got: dict, expected: dict) -> None:
    assert set(got) == set(expected)
    for key, value in expected.items():
        assert math.isclose(float(got[key]), value, rel_tol=1e-9, abs_tol=1e-12) or (
            math.isnan(value) and math.isnan(float(got[key]))
        ), key


@pytest.mark.parametrize("levels", [False, True])
def test_raw_embeddings_are_ranked_by_cosine(levels: bool) -> None:
    e, labels = _raw(levels=levels)
    _close(retrieval_metrics(e, labels, recall_at=(1, 3)), oracle_retrieval_metrics(e, labels, recall_at=(1, 3)))
    gallery = dict(ref_embeddings=e[25:], ref_labels=labels[25:])
    _close(
        retrieval_metrics(e[:25], labels[:25], recall_at=(1, 3), **gallery),
        oracle_retrieval_metrics(e[:25], labels[:25], recall_at=(1, 3), **gallery),
    )
    metric = RetrievalMetrics(recall_at=(1, 3))
    metric.update(e[:17], labels[:17])
    metric.update(e[17:], labels[17:])
    _close(metric.compute(), oracle_retrieval_metrics(e, labels, recall_at=(1, 3)))
    raw_dot = retrieval_metrics(e, labels, recall_at=(1, 3), normalize=False)
    _close(raw_dot, oracle_retrieval_metrics(e, labels, recall_at=(1, 3), normalize=False))


def test_compute_returns_tensors_and_works_in_a_metric_collection() -> None:
    e, labels = _raw(seed=1)
    collection = MetricCollection({"val": RetrievalMetrics(recall_at=(1, 2))})
    collection.update(e, labels, torch.arange(40))
    out = collection.compute()
    expected = retrieval_metrics(e, labels, recall_at=(1, 2))
    assert all(isinstance(v, torch.Tensor) and v.ndim == 0 and v.is_floating_point() for v in out.values())
    assert {k.removeprefix("val_") for k in out} == set(expected)  # torchmetrics prefixes the dict's keys
    _close({k.removeprefix("val_"): v for k, v in out.items()}, expected)


def test_forward_returns_the_batch_and_keeps_the_accumulated_state() -> None:
    e, labels = _raw(seed=2, levels=False)
    metric = RetrievalMetrics(recall_at=(1,))
    first = metric(e[:20], labels[:20], torch.arange(20))
    _close(first, retrieval_metrics(e[:20], labels[:20], recall_at=(1,)))
    with pytest.warns(UserWarning, match="No query has a positive"):
        lonely = metric(e[20:23], torch.tensor([100, 101, 102]), torch.arange(20, 23))  # a batch without positives
    assert all(math.isnan(float(lonely[k])) for k in ("map", "map_at_r", "recall_at_1"))
    assert lonely["num_queries"] == 3 and lonely["num_queries_without_positive"] == 3
    with pytest.raises(ValueError, match="dimension 2 but earlier"):  # refused before the state is touched
        metric(torch.randn(3, 2, dtype=torch.float64), labels[:3], torch.arange(3))
    metric.update(e[23:], labels[23:], torch.arange(23, 40))
    all_labels = torch.cat([labels[:20], torch.tensor([100, 101, 102]), labels[23:]])
    _close(metric.compute(), retrieval_metrics(e, all_labels, recall_at=(1,)))


def test_update_refuses_what_it_would_reinterpret() -> None:
    metric = RetrievalMetrics()
    with pytest.raises(TypeError, match="integer class ids"):
        metric.update(torch.randn(3, 2), torch.tensor([0.0, 1.0, 1.0]))
    metric.update(torch.randn(3, 2), torch.tensor([0, 1, 1]))
    with pytest.raises(ValueError, match=r"shape \(3, 2\) but earlier `update` calls gave \('B',\)"):
        metric.update(torch.randn(3, 2), torch.tensor([[0, 0], [1, 0], [1, 0]]))
    with pytest.raises(ValueError, match="dimension 4 but earlier `update` calls gave 2"):
        metric.update(torch.randn(3, 4), torch.tensor([0, 1, 1]))
    with pytest.raises(ValueError, match="`chunk_size`"):
        RetrievalMetrics(chunk_size=True)
    with pytest.raises(ValueError, match="`chunk_size`"):
        retrieval_metrics(torch.randn(4, 2), torch.tensor([0, 0, 1, 1]), chunk_size=True)
    same = RetrievalMetrics()
    same.update(torch.randn(4, 2), torch.tensor([0, 0, 1, 1]), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="`ids` are all equal"):
        same.compute()


def test_gallery_only_gives_nan_not_an_error() -> None:
    metric = RetrievalMetrics(recall_at=(1,))
    metric.update(torch.randn(3, 2), torch.tensor([0, 0, 1]), gallery=True)
    with pytest.warns(UserWarning, match="no query"):
        out = metric.compute()
    assert math.isnan(float(out["map"])) and out["num_queries"] == 0


def _run_shards(world_size: int, evaluate) -> list:
    """Run ``evaluate(shard)`` for every rank in its own thread, with in-process all-reductions (what DDP does)."""
    barrier = threading.Barrier(world_size)
    slots: list = [None] * world_size
    results: list = [None] * world_size

    def shard(rank: int) -> QueryShard:
        def reduce(tensor: torch.Tensor, op: str) -> torch.Tensor:
            slots[rank] = tensor.clone()
            barrier.wait()
            stacked = torch.stack(slots)
            result = stacked.sum(0) if op == "sum" else stacked.min(0).values
            barrier.wait()
            return tensor.copy_(result)

        return QueryShard(rank, world_size, reduce)

    def run(rank: int) -> None:
        results[rank] = evaluate(shard(rank))

    threads = [threading.Thread(target=run, args=(rank,)) for rank in range(world_size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@pytest.mark.parametrize("ties", ["pessimistic", "average"])
@pytest.mark.parametrize("path", ["symmetric", "rows", "hierarchical", "gallery"])
@pytest.mark.parametrize("world_size", [2, 3])
def test_shares_add_up_to_one_process(path: str, world_size: int, ties: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every process of a sharded evaluation returns the one-process result bit for bit, and the processes compute
    disjoint shares of the score tiles (together exactly the tiles of one process); the 2-process DDP test is
    tests/metrics/test_lightning_ddp.py."""
    e, labels = _raw(60, seed=3, levels=path == "hierarchical")
    kwargs = dict(recall_at=(1, 4), chunk_size=16 if path == "symmetric" else 7, ties=ties)  # tiles of 16 > a class
    if path == "rows":  # duplicated ids: the row-by-row path
        kwargs["ids"] = torch.arange(60) // 2 * 2
    if path == "gallery":
        kwargs.update(ref_embeddings=e[20:], ref_labels=labels[20:])
        e, labels = e[:20], labels[:20]
    products: list[int] = []
    original = symmetric_ranks._Tiles.product
    monkeypatch.setattr(symmetric_ranks._Tiles, "product", lambda tiles: products.append(1) or original(tiles))
    expected = retrieval_metric_tensors(e, labels, **kwargs)
    alone = len(products)
    results = _run_shards(world_size, lambda shard: retrieval_metric_tensors(e, labels, shard=shard, **kwargs))
    assert len(products) == 2 * alone  # no tile computed twice
    assert (alone > 0) == (path == "symmetric")
    for got in results:
        for key, value in expected.items():
            if path == "symmetric":  # the same tiles and integer counts: bit for bit
                assert torch.equal(got[key], value) or (value.isnan() and got[key].isnan()), key
            else:  # a row's float32 scores may round differently in a chunk of other rows (BLAS kernels)
                torch.testing.assert_close(got[key], value, rtol=1e-6, atol=0, equal_nan=True)
        assert torch.equal(torch.stack(list(got.values())), torch.stack(list(results[0].values())))  # every rank
