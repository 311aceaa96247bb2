"""`retrieval_metrics` against the brute-force oracle of docs/spec.md §1, the worked examples, and scikit-learn."""

from __future__ import annotations

import functools
import math

import pytest
import torch
from sklearn.metrics import average_precision_score, ndcg_score

from ranklit.functional import retrieval_metrics as _retrieval_metrics
from ranklit.functional.metrics._hierarchical import hierarchical_query_metrics
from tests.metrics.ranked import ranked_relevant
from tests.oracles.metrics import oracle_retrieval_metrics as _oracle_retrieval_metrics

# The ranking arithmetic on raw dot products (integer coordinates give exact ties); normalisation: test_raw_inputs.py
retrieval_metrics = functools.partial(_retrieval_metrics, normalize=False)
oracle_retrieval_metrics = functools.partial(_oracle_retrieval_metrics, normalize=False)


def _assert_same(got: dict, expected: dict) -> None:
    assert set(got) == set(expected), set(got) ^ set(expected)
    for key, value in expected.items():
        if isinstance(value, int):
            assert got[key] == value, key
            assert isinstance(got[key], int), key
        else:
            assert isinstance(got[key], float), key
            assert math.isclose(got[key], value, rel_tol=1e-9, abs_tol=1e-12), (key, got[key], value)


def _hierarchy(n: int, sizes: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """[n, L] consistent labels: column h+1 = column h // sizes[h]."""
    fine = torch.randint(0, math.prod(sizes) * 2, (n,), generator=generator)
    columns = [fine]
    for size in sizes:
        columns.append(columns[-1] // size)
    return torch.stack(columns, 1)


def _data(n: int, d: int, seed: int, ties: bool) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if ties:  # small integer coordinates in float64: many exactly equal scores
        return torch.randint(-2, 3, (n, d), generator=g).double()
    return torch.nn.functional.normalize(torch.randn(n, d, generator=g, dtype=torch.float64), dim=1)


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_flat_self_retrieval(seed: int, ties: bool) -> None:
    e = _data(30, 3, seed, ties)
    labels = torch.randint(0, 6, (30,), generator=torch.Generator().manual_seed(seed + 10))
    got = retrieval_metrics(e, labels, recall_at=(1, 3, 5), chunk_size=7)
    _assert_same(got, oracle_retrieval_metrics(e, labels, recall_at=(1, 3, 5)))


@pytest.mark.parametrize("sizes", [(3,), (2, 3)])
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("alpha", [1.0, 3.0])
@pytest.mark.usefixtures("counting")
def test_hierarchical_self_retrieval(sizes: tuple[int, ...], ties: bool, alpha: float) -> None:
    g = torch.Generator().manual_seed(len(sizes) + int(ties))
    e = _data(28, 3, len(sizes), ties)
    labels = _hierarchy(28, sizes, g)
    got = retrieval_metrics(e, labels, recall_at=(1, 4), alpha=alpha, chunk_size=5)
    _assert_same(got, oracle_retrieval_metrics(e, labels, recall_at=(1, 4), alpha=alpha))


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.usefixtures("counting")
def test_query_gallery_with_ids_and_junk(ties: bool) -> None:
    g = torch.Generator().manual_seed(3)
    queries, gallery = _data(12, 3, 5, ties), _data(25, 3, 6, ties)
    q_labels, g_labels = _hierarchy(12, (3,), g), _hierarchy(25, (3,), g)
    ids, ref_ids = torch.randint(0, 15, (12,), generator=g), torch.randint(0, 15, (25,), generator=g)
    junk = torch.rand(12, 25, generator=g) < 0.2
    kwargs = dict(ref_embeddings=gallery, ref_labels=g_labels, ids=ids, ref_ids=ref_ids, junk=junk, recall_at=(1, 2))
    got = retrieval_metrics(queries, q_labels, chunk_size=4, **kwargs)
    _assert_same(got, oracle_retrieval_metrics(queries, q_labels, **kwargs))
    flat = dict(ref_embeddings=gallery, ref_labels=g_labels[:, 0], recall_at=(1, 2))
    got = retrieval_metrics(queries, q_labels[:, 0], **flat)
    _assert_same(got, oracle_retrieval_metrics(queries, q_labels[:, 0], **flat))


def test_self_retrieval_with_repeated_ids_removes_every_copy() -> None:
    e, labels = _data(20, 3, 7, False), torch.arange(20) % 4
    ids = torch.arange(20) % 10  # items i and i + 10 share an id: each removes the other as well as itself
    _assert_same(retrieval_metrics(e, labels, ids=ids), oracle_retrieval_metrics(e, labels, ids=ids))


def test_float32_chunking_does_not_change_results() -> None:
    e = torch.nn.functional.normalize(torch.randn(50, 8, generator=torch.Generator().manual_seed(0)), dim=1)
    labels = _hierarchy(50, (2,), torch.Generator().manual_seed(1))
    reference = retrieval_metrics(e, labels, chunk_size=50)
    for chunk in (1, 7, None):  # the ranks are identical; only the float64 summation order of the means changes
        assert retrieval_metrics(e, labels, chunk_size=chunk) == pytest.approx(reference, rel=1e-12)


def _ranked_list_problem(levels: list[int], num_levels: int) -> tuple[torch.Tensor, ...]:
    """One query, a gallery whose scores decrease along the list, labels giving the requested levels."""
    angles = torch.linspace(0.1, 1.4, len(levels), dtype=torch.float64)
    gallery = torch.stack([angles.cos(), angles.sin()], 1)
    query = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    q_label = torch.zeros(1, num_levels, dtype=torch.long)
    rows = []
    for i, level in enumerate(levels):  # agree on the `level` coarsest columns, differ (label i + 1) below
        rows.append([0 if h >= num_levels - level else i + 1 for h in range(num_levels)])
    return query, q_label, gallery, torch.tensor(rows)


def test_spec_worked_example_hierarchical() -> None:
    query, q_label, gallery, g_labels = _ranked_list_problem([1, 2, 0, 2, 1, 0], 2)
    out = retrieval_metrics(query, q_label, ref_embeddings=gallery, ref_labels=g_labels)
    assert out["asi"] == pytest.approx(0.47917, abs=1e-5)
    assert out["ndcg"] == pytest.approx(0.785, abs=1e-3)


def test_spec_worked_example_binary() -> None:
    query, q_label, gallery, g_labels = _ranked_list_problem([1, 0, 1, 0, 0], 1)
    out = retrieval_metrics(query, q_label[:, 0], ref_embeddings=gallery, ref_labels=g_labels[:, 0])
    assert out["map"] == pytest.approx(0.8333, abs=1e-4)
    assert out["map_at_r"] == pytest.approx(0.5)
    scores = torch.tensor([[5.0, 4, 3, 2, 1]])
    asi = hierarchical_query_metrics(ranked_relevant(scores, torch.tensor([[1, 0, 1, 0, 0]]), 1), 1.0)["asi"]
    assert float(asi) == pytest.approx(0.75)


def test_ap_and_ndcg_against_scikit_learn() -> None:
    g = torch.Generator().manual_seed(11)
    queries, gallery = _data(6, 4, 8, False), _data(40, 4, 9, False)
    q_labels, g_labels = _hierarchy(6, (4,), g), _hierarchy(40, (4,), g)
    q_labels[:, 0] = g_labels[:6, 0]  # every query has fine positives
    q_labels[:, 1] = g_labels[:6, 1]
    out = retrieval_metrics(queries, q_labels, ref_embeddings=gallery, ref_labels=g_labels)
    scores = (queries @ gallery.T).numpy()
    fine = (q_labels[:, None, 0] == g_labels[None, :, 0]).numpy()
    levels = (q_labels[:, None, 1] == g_labels[None, :, 1]).long() + torch.from_numpy(fine).long()
    assert out["map"] == pytest.approx(sum(average_precision_score(fine[i], scores[i]) for i in range(6)) / 6)
    ndcg = ndcg_score((2.0 ** levels.double() - 1).numpy(), scores)  # distinct scores: no tie convention involved
    assert out["ndcg"] == pytest.approx(ndcg)


def test_scikit_learn_on_tied_scores() -> None:
    """scikit-learn's NDCG averages the gains of a tie group: ``ties="average"``. Its AP gives every positive of a
    tie group the group's last precision, which no ordering does: it lies between the pessimistic and optimistic AP."""
    g = torch.Generator().manual_seed(2)
    queries = torch.tensor([[1.0, 1.0], [1.0, -1.0], [0.0, 1.0]], dtype=torch.float64)
    gallery = torch.randint(0, 3, (30, 2), generator=g).double()
    q_labels = torch.tensor([[1, 0], [0, 0], [2, 1]])
    g_labels = torch.randint(0, 4, (30,), generator=g)
    g_labels = torch.stack([g_labels, g_labels // 2], 1)
    kwargs = dict(ref_embeddings=gallery, ref_labels=g_labels)
    by_policy = {ties: retrieval_metrics(queries, q_labels, ties=ties, **kwargs) for ties in ("pessimistic", "average",
                                                                                                 "optimistic")}
    scores = (queries @ gallery.T).numpy()
    levels = (q_labels[:, None, 1] == g_labels[None, :, 1]).long() + (q_labels[:, None, 0] == g_labels[None, :, 0])
    assert (scores[:, :, None] == scores[:, None, :]).sum() > 3 * 30  # many ties
    assert by_policy["average"]["ndcg"] == pytest.approx(ndcg_score((2.0 ** levels.double() - 1).numpy(), scores))
    fine = (q_labels[:, None, 0] == g_labels[None, :, 0]).numpy()
    sklearn_ap = sum(average_precision_score(fine[i], scores[i]) for i in range(3)) / 3
    assert by_policy["pessimistic"]["map"] < sklearn_ap < by_policy["optimistic"]["map"]


@pytest.mark.parametrize("ties", [False, True])
def test_large_classes_take_the_binary_search_path(ties: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from ranklit.functional.metrics import _counting

    monkeypatch.setattr(_counting, "_MAX_PASSES", 3)  # classes of 5-10 items now exceed the comparison passes
    monkeypatch.setattr(_counting, "_MIN_TILE_ROWS", 3)
    monkeypatch.setattr(_counting, "_TILE_ELEMENTS", 0)
    e = _data(40, 3, 4, ties)
    labels = torch.arange(40) % 5
    _assert_same(retrieval_metrics(e, labels, chunk_size=16), oracle_retrieval_metrics(e, labels))


@pytest.mark.parametrize("tile_rows", [32, 2])  # one tile; tiles of 2 rows
def test_both_counting_strategies_agree(tile_rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from ranklit.functional.metrics import _counting

    monkeypatch.setattr(_counting, "_MIN_TILE_ROWS", tile_rows)
    monkeypatch.setattr(_counting, "_TILE_ELEMENTS", 0)
    g = torch.Generator().manual_seed(0)
    scores = torch.randint(0, 5, (7, 40), generator=g).float()
    scores[:, :3] = float("-inf")
    thresholds = torch.cat([scores[:, 3:10], torch.full((7, 2), float("-inf"))], 1)
    thresholds[:3, 5:] = float("-inf")  # rows with fewer real thresholds
    thresholds = thresholds.sort(1, descending=True).values
    by_passes = _counting._count_at_least_by_passes(scores, thresholds)
    by_search = _counting._count_at_least_by_search(scores, thresholds)
    real = torch.isfinite(thresholds)
    assert torch.equal(by_passes[real], by_search[real])
    expected = (scores[:, None, :] >= thresholds[:, :, None]).sum(-1)
    assert torch.equal(by_search[real], expected[real])
