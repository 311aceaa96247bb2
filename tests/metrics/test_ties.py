"""Tie policies of every metric against float64 brute force over all orderings of each tie group (docs/spec.md §0,
Ranks and ties), and the metrics the peers have (R-precision, MRR, NDCG@k, per-class averaging, per-query values)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from ranklit.functional import retrieval_metrics
from ranklit.functional.metrics._retrieval import retrieval_metric_tensors
from tests.oracles.metrics import _ordered_metrics, oracle_query, oracle_retrieval_metrics, tie_orderings

POLICIES = ("pessimistic", "average", "optimistic")


def _tied_problem(seed: int, num_levels: int, size: int = 8) -> tuple[torch.Tensor, ...]:
    """Queries ``[[1], [-1], [2]]`` and a 1-D gallery of small integers: the scores are the gallery values (signed),
    with tie groups of a few items; labels with ``num_levels`` consistent columns."""
    g = torch.Generator().manual_seed(seed)
    gallery = torch.randint(0, 4, (size, 1), generator=g).double()
    fine = torch.randint(0, 4, (size,), generator=g)
    columns = [fine, fine // 2, fine // 4][:num_levels]
    g_labels = torch.stack(columns, 1) if num_levels > 1 else fine
    queries = torch.tensor([[1.0], [-1.0], [2.0]], dtype=torch.float64)
    q_fine = torch.tensor([0, 1, 3])
    q_labels = torch.stack([q_fine, q_fine // 2, q_fine // 4][:num_levels], 1) if num_levels > 1 else q_fine
    return queries, q_labels, gallery, g_labels


@pytest.mark.parametrize("num_levels", [1, 2, 3])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("ties", POLICIES)
def test_every_metric_of_every_query_against_all_orderings(ties: str, seed: int, num_levels: int) -> None:
    queries, q_labels, gallery, g_labels = _tied_problem(seed, num_levels)
    options = dict(ref_embeddings=gallery, ref_labels=g_labels, recall_at=(1, 2, 3), ndcg_at=(2, 5), normalize=False)
    got = retrieval_metric_tensors(queries, q_labels, ties=ties, per_query=True, chunk_size=2, **options)
    expected = oracle_retrieval_metrics(queries, q_labels, ties=ties, per_query=True, **options)
    assert set(got) == set(expected)
    for key, values in expected.items():
        if key.startswith("num_"):
            assert float(got[key]) == values
            continue
        torch.testing.assert_close(got[key], torch.tensor(values, dtype=torch.float64), rtol=1e-9, atol=1e-12,
                                   equal_nan=True, msg=key)


def test_pessimistic_and_optimistic_are_the_worst_and_best_orderings() -> None:
    """Brute force: min and max of every binary metric (and graded NDCG) over all orderings of the tie groups."""
    g = torch.Generator().manual_seed(5)
    for _ in range(20):
        scores = torch.randint(0, 3, (7,), generator=g).tolist()
        levels = torch.randint(0, 3, (7,), generator=g).tolist()
        same = [[lv >= 2 - h for lv in levels] for h in range(2)]
        results = [oracle_query(scores, levels, same, 2, (1, 3), 1.0, (3,), ties) for ties in POLICIES]
        orders = tie_orderings(scores, levels, "average")
        runs = [_ordered_metrics(o, levels, same, 2, (1, 3), (3,), 1.0) for o in orders]
        for key, value in results[0].items():
            # H-AP: the oracle takes its min/max itself, checked against ranklit in test_hap_ties.py; ASI: not claimed
            if value is None or key in ("hap", "asi"):
                continue
            assert value == pytest.approx(min(run[key] for run in runs)), key
            assert results[2][key] == pytest.approx(max(run[key] for run in runs)), key
            assert value <= results[1][key] + 1e-12 <= results[2][key] + 2e-12, key


def test_two_positives_tied_at_the_top_give_precision_at_1_one() -> None:
    """pytorch-metric-learning's expectation: every ordering of a tie of positives at the top puts a positive first."""
    query, gallery = torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    out = retrieval_metrics(query, torch.tensor([0]), ref_embeddings=gallery, ref_labels=torch.tensor([0, 0, 1, 1]),
                            recall_at=(1,))
    assert out["precision_at_1"] == 1.0 and out["recall_at_1"] == 1.0 and out["map"] == 1.0 and out["mrr"] == 1.0
    # a negative in the tie: the worst ordering puts it first, the average ordering with probability 1/3
    gallery[2] = torch.tensor([1.0, 0.0])
    policies = {t: retrieval_metrics(query, torch.tensor([0]), ref_embeddings=gallery,
                                     ref_labels=torch.tensor([0, 0, 1, 1]), ties=t) for t in POLICIES}
    assert [policies[t]["precision_at_1"] for t in POLICIES] == pytest.approx([0.0, 2 / 3, 1.0])
    assert policies["pessimistic"]["map"] == pytest.approx((1 / 2 + 2 / 3) / 2)


def test_average_over_a_large_tie_group_matches_its_expectation_formula() -> None:
    """All 12 items tied (12! orderings): the expectation of AP, P@1 and MRR by combinatorics."""
    n, p = 12, 3
    query, gallery = torch.ones(1, 1), torch.ones(n, 1)
    labels = torch.tensor([1] * p + [0] * (n - p))
    out = retrieval_metrics(query, torch.tensor([1]), ref_embeddings=gallery, ref_labels=labels, ties="average",
                            recall_at=(1, 4), normalize=False)
    first = [math.comb(n - t, p - 1) / math.comb(n, p) for t in range(1, n - p + 2)]  # P(first positive at t)
    assert out["mrr"] == pytest.approx(sum(pr / t for t, pr in enumerate(first, start=1)), rel=1e-12)
    assert out["precision_at_1"] == pytest.approx(p / n, rel=1e-12)
    assert out["recall_at_4"] == pytest.approx(1 - math.comb(n - p, 4) / math.comb(n, 4), rel=1e-12)
    expected_ap = sum(p / n * (1 + (t - 1) * (p - 1) / (n - 1)) / t for t in range(1, n + 1)) / p
    assert out["map"] == pytest.approx(expected_ap, rel=1e-12)
    assert out["r_precision"] == pytest.approx(p / n, rel=1e-12)


def test_which_scores_tie_depends_on_the_dtype() -> None:
    """Scores 1 and 0.9999 are distinct in float32 and equal in float16: the tie, hence P@1, follows the dtype."""
    query, gallery = torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0, 0.0], [0.9999, 0.0]])
    labels = torch.tensor([0, 1])  # the positive scores 1, the negative 0.9999
    for dtype, expected in ((torch.float32, 1.0), (torch.float16, 0.0)):
        got = retrieval_metrics(query.to(dtype), torch.tensor([0]), ref_embeddings=gallery.to(dtype), ref_labels=labels,
                                normalize=False)
        assert got["precision_at_1"] == expected, dtype


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])  # "average": its oracle enumerates too many orders
def test_class_average_and_per_query_values(ties: str) -> None:
    g = torch.Generator().manual_seed(3)
    e = torch.randint(-1, 2, (24, 2), generator=g).double()
    labels = torch.tensor([0] * 10 + [1] * 4 + [2] * 6 + [3] * 3 + [4])
    for average in ("query", "class"):
        got = retrieval_metrics(e, labels, ties=ties, average=average, normalize=False, recall_at=(1, 2))
        expected = oracle_retrieval_metrics(e, labels, ties=ties, average=average, normalize=False, recall_at=(1, 2))
        assert got == pytest.approx(expected, rel=1e-9)
    per_query = retrieval_metric_tensors(e, labels, ties=ties, per_query=True, normalize=False)
    assert per_query["map"].shape == (24,) and per_query["map"][-1].isnan()  # the single item of class 4
    assert float(per_query["map"].nanmean()) == pytest.approx(retrieval_metrics(e, labels, ties=ties,
                                                                                normalize=False)["map"])


def test_tie_free_policies_agree() -> None:
    e = torch.nn.functional.normalize(torch.randn(30, 4, generator=torch.Generator().manual_seed(0)), dim=1)
    labels = torch.arange(30) % 4
    values = [retrieval_metrics(e, labels, ties=t) for t in POLICIES]
    for key in values[0]:
        assert values[0][key] == pytest.approx(values[1][key], rel=1e-12) == values[2][key], key


def test_unknown_options_are_refused() -> None:
    e, labels = torch.randn(4, 2), torch.tensor([0, 0, 1, 1])
    with pytest.raises(ValueError, match="`ties` must be one of"):
        retrieval_metrics(e, labels, ties="random")
    with pytest.raises(ValueError, match="`average` must be one of"):
        retrieval_metrics(e, labels, average="macro")
    with pytest.raises(ValueError, match="`ndcg_at` must be"):
        retrieval_metrics(e, labels, ndcg_at=(0,))


def test_new_metrics_equal_torchmetrics_on_tie_free_data() -> None:
    """R-precision, MRR, NDCG@k and the DML Recall@k are torchmetrics' RetrievalRPrecision, RetrievalMRR,
    RetrievalNormalizedDCG(top_k) and RetrievalHitRate(top_k) (scores shifted by +2: torchmetrics counts a score
    <= 0 as not retrieved)."""
    from torchmetrics.retrieval import (
        RetrievalHitRate,
        RetrievalMRR,
        RetrievalNormalizedDCG,
        RetrievalRPrecision,
    )

    g = torch.Generator().manual_seed(7)
    queries = torch.nn.functional.normalize(torch.randn(12, 6, generator=g, dtype=torch.float64), dim=1)
    gallery = torch.nn.functional.normalize(torch.randn(50, 6, generator=g, dtype=torch.float64), dim=1)
    q_labels, g_labels = torch.randint(0, 5, (12,), generator=g), torch.randint(0, 5, (50,), generator=g)
    out = retrieval_metrics(queries, q_labels, ref_embeddings=gallery, ref_labels=g_labels, recall_at=(1, 5),
                            ndcg_at=(3, 10))
    scores = (queries @ gallery.T + 2.0).flatten()
    target = (q_labels[:, None] == g_labels[None, :]).flatten()
    indexes = torch.arange(12)[:, None].expand(12, 50).flatten()
    references = {
        "r_precision": RetrievalRPrecision(),
        "mrr": RetrievalMRR(),
        "ndcg_at_3": RetrievalNormalizedDCG(top_k=3),
        "ndcg_at_10": RetrievalNormalizedDCG(top_k=10),
        "recall_at_5": RetrievalHitRate(top_k=5),
    }
    for key, metric in references.items():
        assert out[key] == pytest.approx(float(metric(scores, target, indexes=indexes)), rel=1e-6), key


def test_orderings_oracle_enumerates_every_ordering() -> None:
    orders = tie_orderings([1.0, 1.0, 0.0, 1.0], [0, 1, 0, 1], "average")
    assert len(orders) == math.factorial(3) and all(order[-1] == 2 for order in orders)
    assert sorted(map(tuple, orders)) == sorted((*p, 2) for p in itertools.permutations([0, 1, 3]))
