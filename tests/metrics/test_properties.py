"""Properties of the exact metrics: invariance to monotone score transforms, perfect rankings, pessimistic ties,
and the errors raised on bad input."""

from __future__ import annotations

import math

import pytest
import torch

from ranklit.functional import retrieval_metrics
from ranklit.functional.inputs import levels_between
from ranklit.functional.metrics._hierarchical import hierarchical_query_metrics, level_binary_metrics
from ranklit.functional.metrics._positive_ranks import SortedKeys, positive_counts
from ranklit.functional.metrics.binary import binary_query_metrics
from ranklit.functional.ties import tie_positives
from tests.metrics.ranked import ranked_relevant


def _scores_and_labels(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(9, 40, generator=g, dtype=torch.float64) * 2 - 1
    scores[:, ::7] = float("-inf")  # removed items
    fine = torch.randint(0, 8, (49,), generator=g)
    return scores, torch.stack([fine, fine // 4], 1)


def _apply(transform, scores: torch.Tensor) -> torch.Tensor:
    """Transform the scores of the items in the ranking; removed items stay at -inf."""
    return torch.where(torch.isfinite(scores), transform(scores), scores)


CUTOFFS = {"recall_at": (1, 3), "ndcg_at": (2,)}


def _binary(scores: torch.Tensor, index: torch.Tensor, valid: torch.Tensor) -> dict[str, torch.Tensor]:
    return binary_query_metrics(tie_positives(*positive_counts(scores, index, valid), "pessimistic"), CUTOFFS)


@pytest.mark.parametrize("transform", [lambda s: s**3, lambda s: torch.exp(4 * s) - 7.0, lambda s: torch.atan(s) * 5])
def test_monotone_transform_of_scores_changes_nothing(transform) -> None:
    scores, labels = _scores_and_labels(0)
    q_labels, r_labels = labels[:9], labels[9:]
    levels = levels_between(q_labels, r_labels)
    for h in range(2):
        index, valid = SortedKeys(r_labels[:, h]).match(q_labels[:, h])
        before = _binary(scores, index, valid)
        after = _binary(_apply(transform, scores), index, valid)
        for key in before:
            assert torch.equal(before[key], after[key]), key
    before_sorted = ranked_relevant(scores, levels, 2)
    after_sorted = ranked_relevant(_apply(transform, scores), levels, 2)
    pairs = [(hierarchical_query_metrics(before_sorted, 1.0), hierarchical_query_metrics(after_sorted, 1.0))]
    for h in range(2):
        pairs.append((level_binary_metrics(before_sorted, h, CUTOFFS), level_binary_metrics(after_sorted, h, CUTOFFS)))
    for before, after in pairs:
        for key in before:
            assert torch.allclose(before[key].double(), after[key].double(), rtol=1e-12), key


def test_increasing_affine_map_of_embeddings_changes_nothing() -> None:
    g = torch.Generator().manual_seed(1)
    queries = torch.randn(10, 4, generator=g, dtype=torch.float64)
    gallery = torch.randn(30, 4, generator=g, dtype=torch.float64)
    q_labels, g_labels = torch.randint(0, 3, (10,), generator=g), torch.randint(0, 3, (30,), generator=g)
    before = retrieval_metrics(queries, q_labels, ref_embeddings=gallery, ref_labels=g_labels, normalize=False)
    # s -> 3 s + 0.5 by scaling the queries and appending a constant coordinate
    scaled_q = torch.cat([3 * queries, torch.ones(10, 1, dtype=torch.float64)], 1)
    shifted_g = torch.cat([gallery, torch.full((30, 1), 0.5, dtype=torch.float64)], 1)
    after = retrieval_metrics(scaled_q, q_labels, ref_embeddings=shifted_g, ref_labels=g_labels, normalize=False)
    assert after == pytest.approx(before)


def test_perfect_ranking_gives_one_everywhere() -> None:
    # 3 coarse classes x 3 fine classes x 4 items; each item = its coarse direction + a small fine offset
    fine = torch.arange(36) // 4
    coarse = fine // 3
    coarse_dir = torch.eye(3, dtype=torch.float64)[coarse] * 10
    fine_dir = torch.randn(9, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    fine_dir = torch.nn.functional.normalize(fine_dir, dim=1)
    # distinct items (a tie of a positive with a negative would put the negative first)
    jitter = 1e-3 * torch.randn(36, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    e = torch.nn.functional.normalize(coarse_dir + fine_dir[fine] + jitter, dim=1)
    out = retrieval_metrics(e, torch.stack([fine, coarse], 1), recall_at=(1, 2))
    for key, value in out.items():
        if not key.startswith("num_"):
            assert value == pytest.approx(1.0), key
    assert out["num_queries"] == 36 and out["num_queries_without_positive"] == 0


def test_pessimistic_ties_put_the_negatives_of_a_tie_first() -> None:
    query = torch.tensor([[1.0, 0.0]])
    gallery = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])  # the positive ties with a negative at the top
    out = retrieval_metrics(
        query, torch.tensor([0]), ref_embeddings=gallery, ref_labels=torch.tensor([0, 1, 1]), recall_at=(1, 2)
    )
    assert out["precision_at_1"] == 0.0 and out["recall_at_1"] == 0.0 and out["recall_at_2"] == 1.0
    assert out["map"] == 0.5 and out["map_at_r"] == 0.0 and out["mrr"] == 0.5


def test_queries_without_positive_are_counted_and_left_out() -> None:
    e = torch.nn.functional.normalize(torch.randn(6, 3, generator=torch.Generator().manual_seed(0)), dim=1)
    out = retrieval_metrics(e, torch.tensor([0, 0, 1, 1, 2, 3]))
    assert out["num_queries"] == 6 and out["num_queries_without_positive"] == 2
    with_positive = retrieval_metrics(  # the same four queries alone, against the same retrieval set
        e[:4], torch.tensor([0, 0, 1, 1]), ref_embeddings=e, ref_labels=torch.tensor([0, 0, 1, 1, 2, 3]),
        ids=torch.arange(4), ref_ids=torch.arange(6),
    )
    assert out["map"] == with_positive["map"]


def test_errors_name_the_problem() -> None:
    e = torch.nn.functional.normalize(torch.randn(6, 3), dim=1)
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    with pytest.raises(ValueError, match="rows but the embeddings have"):
        retrieval_metrics(e, labels[:5])
    with pytest.raises(ValueError, match="NaN or infinite"):
        retrieval_metrics(torch.full((6, 3), float("nan")), labels)
    with pytest.raises(ValueError, match="not a consistent hierarchy"):
        retrieval_metrics(e, torch.stack([labels, torch.tensor([0, 1, 0, 0, 1, 1])], 1))
    with pytest.warns(UserWarning, match="No query has a positive"):  # undefined, not an error: NaN and counted
        out = retrieval_metrics(e, torch.arange(6))
    assert math.isnan(out["map"]) and out["num_queries_without_positive"] == 6
    with pytest.raises(ValueError, match="`junk`"):
        retrieval_metrics(e, labels, junk=torch.zeros(6, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="`recall_at`"):
        retrieval_metrics(e, labels, recall_at=())
    with pytest.raises(ValueError, match="`chunk_size`"):
        retrieval_metrics(e, labels, chunk_size=0)
