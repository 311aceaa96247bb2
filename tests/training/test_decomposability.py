"""Decomposability gap (ROADMAP Eq. 6) against the exact-AP oracle."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from ranklit.data import PKSampler
from ranklit.metrics import DecomposabilityGap, decomposability_gap
from tests.oracles.losses import average_precision
from tests.oracles.metrics import oracle_retrieval_metrics


def _set() -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(48) // 6
    centres = torch.randn(8, 5, generator=g, dtype=torch.float64)
    embeddings = centres[labels] + 0.9 * torch.randn(48, 5, generator=g, dtype=torch.float64)
    return torch.nn.functional.normalize(embeddings, dim=1), torch.stack([labels, labels // 2], 1)


def _oracle_batch_map(embeddings: Tensor, labels: Tensor, batches: list[Tensor]) -> float:
    """Mean over (query, batch) pairs of the exact AP of the query in its batch (queries with a positive)."""
    aps = []
    for batch in batches:
        for q in batch:
            fine = labels[batch, 0]
            if ((fine == labels[q, 0]) & (batch != q)).any():
                query = (embeddings[q : q + 1], labels[q : q + 1, 0])
                aps.append(average_precision(*query, embeddings[batch], fine, q.view(1), batch))
    return sum(aps) / len(aps)


def test_gap_matches_the_oracle_on_pk_batches() -> None:
    embeddings, labels = _set()
    batches = [torch.tensor(b) for b in PKSampler(labels[:, 0], 2, 3, seed=0, rank=0, world_size=1)]
    out = decomposability_gap(embeddings, labels, batches)
    expected_batch = _oracle_batch_map(embeddings, labels, batches)
    expected_map = average_precision(embeddings, labels[:, 0])
    assert out["batch_map"] == pytest.approx(expected_batch, abs=1e-12)
    assert out["map"] == pytest.approx(expected_map, abs=1e-12)
    assert out["gap"] == pytest.approx(expected_batch - expected_map, abs=1e-12)
    assert out["gap"] > 0.05  # small batches overestimate the AP


def test_gap_shrinks_with_the_batch_size_and_vanishes_for_the_whole_set() -> None:
    embeddings, labels = _set()
    samplers = [PKSampler(labels[:, 0], p, 3, seed=0, rank=0, world_size=1) for p in (2, 4, 8)]
    gaps = [decomposability_gap(embeddings, labels, [torch.tensor(b) for b in s])["gap"] for s in samplers]
    assert gaps[0] > gaps[1] > gaps[2]
    assert decomposability_gap(embeddings, labels, [torch.arange(48)])["gap"] == pytest.approx(0.0, abs=1e-12)


def test_metric_equals_the_function_and_ranks_against_given_retrieval_sets() -> None:
    embeddings, labels = _set()
    batches = [torch.arange(i, i + 12) for i in range(0, 48, 12)]
    metric = DecomposabilityGap()
    for batch in batches:
        metric.update(embeddings[batch], labels[batch], batch)
    assert metric.compute() == pytest.approx(decomposability_gap(embeddings, labels, batches), abs=1e-12)

    metric.reset()  # queries of one half ranked against the whole set (e.g. a DDP-gathered batch)
    everything = torch.arange(48)
    for half in (everything[:24], everything[24:]):
        refs = {"ref_embeddings": embeddings, "ref_labels": labels, "ref_ids": everything}
        metric.update(embeddings[half], labels[half], half, **refs)
    out = metric.compute()
    assert out["batch_map"] == pytest.approx(average_precision(embeddings, labels[:, 0]), abs=1e-12)
    assert out["gap"] == pytest.approx(0.0, abs=1e-12)


def test_metric_keeps_the_last_embedding_of_a_repeated_sample() -> None:
    embeddings, labels = _set()
    metric = DecomposabilityGap()
    stale = torch.nn.functional.normalize(torch.randn(12, 5, dtype=torch.float64), dim=1)
    metric.update(stale, labels[:12], torch.arange(12))
    metric.update(embeddings, labels, torch.arange(48))
    assert metric.compute()["map"] == pytest.approx(average_precision(embeddings, labels[:, 0]), abs=1e-12)
    with pytest.raises(ValueError, match="together"):
        metric.update(embeddings, labels, torch.arange(48), ref_embeddings=embeddings)


@pytest.mark.parametrize("ties", ["pessimistic", "average", "optimistic"])
def test_both_terms_follow_the_tie_policy_against_all_orderings(ties: str) -> None:
    """Unit embeddings along the 4 axis directions: many exact ties; both APs against every ordering of them."""
    g = torch.Generator().manual_seed(4)
    axes = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]], dtype=torch.float64)
    embeddings, labels = axes[torch.randint(0, 4, (10,), generator=g)], torch.randint(0, 3, (10,), generator=g)
    batches = [torch.tensor([0, 3, 4, 7, 9]), torch.tensor([1, 2, 5, 6, 8]), torch.tensor([0, 1, 2, 3])]
    aps = []
    for batch in batches:
        per_query = oracle_retrieval_metrics(embeddings[batch], labels[batch], ids=batch, ties=ties, per_query=True)
        aps += [ap for ap in per_query["map"] if ap == ap]  # type: ignore[union-attr]  # not NaN: has a positive
    expected = {"batch_map": sum(aps) / len(aps), "map": oracle_retrieval_metrics(embeddings, labels, ties=ties)["map"]}
    expected["gap"] = expected["batch_map"] - expected["map"]
    assert decomposability_gap(embeddings, labels, batches, ties=ties) == pytest.approx(expected, abs=1e-12)
    metric = DecomposabilityGap(ties=ties)
    for batch in batches:
        metric.update(embeddings[batch], labels[batch], batch)
    assert metric.compute() == pytest.approx(expected, abs=1e-12)
    with pytest.raises(ValueError, match="`ties` must be one of"):
        DecomposabilityGap(ties="random")
