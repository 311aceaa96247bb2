"""Revisited Oxford/Paris protocols against a brute-force walk down each ranking."""

from __future__ import annotations

import pytest
import torch

from ranklit.functional import retrieval_metrics
from ranklit.functional.landmarks import revisited_map
from tests.oracles.metrics import oracle_revisited_map


def _gnd(num_queries: int, num_refs: int, seed: int) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    gnd = []
    for _ in range(num_queries):
        role = torch.randint(0, 5, (num_refs,), generator=g)  # 0 easy, 1 hard, 2 junk, 3-4 negatives
        gnd.append({key: (role == code).nonzero()[:, 0].tolist() for code, key in enumerate(("easy", "hard", "junk"))})
    gnd[0]["hard"] = []  # a query without a positive in the hard protocol
    return gnd


@pytest.mark.parametrize("trapezoid", [False, True])
def test_protocols_against_brute_force(trapezoid: bool) -> None:
    g = torch.Generator().manual_seed(0)
    queries = torch.nn.functional.normalize(torch.randn(5, 4, generator=g, dtype=torch.float64), dim=1)
    gallery = torch.nn.functional.normalize(torch.randn(30, 4, generator=g, dtype=torch.float64), dim=1)
    gnd = _gnd(5, 30, 1)
    got = revisited_map(queries, gallery, gnd, trapezoid=trapezoid, chunk_size=2)
    assert got == pytest.approx(oracle_revisited_map(queries, gallery, gnd, trapezoid), rel=1e-12)


def test_medium_protocol_equals_retrieval_metrics_with_junk() -> None:
    g = torch.Generator().manual_seed(2)
    queries, gallery = torch.randn(4, 3, generator=g), torch.randn(25, 3, generator=g)
    gnd = _gnd(4, 25, 3)
    # one label per query; a gallery item is labelled with the query it is a positive of (lists made disjoint here)
    ref_labels = torch.full((25,), -1)
    junk = torch.zeros(4, 25, dtype=torch.bool)
    for q, entry in enumerate(gnd):
        entry["easy"] = [i for i in entry["easy"] if i % 4 == q]
        entry["hard"] = [i for i in entry["hard"] if i % 4 == q]
        ref_labels[entry["easy"] + entry["hard"]] = q
        junk[q, entry["junk"]] = True
    expected = retrieval_metrics(queries, torch.arange(4), ref_embeddings=gallery, ref_labels=ref_labels, junk=junk)
    assert revisited_map(queries, gallery, gnd)["map_medium"] == pytest.approx(expected["map"])


def test_bad_ground_truth_is_rejected() -> None:
    q, g = torch.randn(2, 3), torch.randn(5, 3)
    with pytest.raises(ValueError, match="one entry per query"):
        revisited_map(q, g, [{"easy": [0], "hard": [], "junk": []}])
    with pytest.raises(ValueError, match="outside"):
        revisited_map(q, g, [{"easy": [7], "hard": [], "junk": []}] * 2)
    with pytest.raises(ValueError, match="no 'junk'"):
        revisited_map(q, g, [{"easy": [0], "hard": [1]}] * 2)
    with pytest.raises(ValueError, match="'hard' protocol"):
        revisited_map(q, g, [{"easy": [0], "hard": [], "junk": []}] * 2)
