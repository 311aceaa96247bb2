"""H-AP under the three tie policies against every ordering of the tie groups (docs/spec.md §0, Ranks and ties).

``"pessimistic"`` / ``"average"`` / ``"optimistic"`` must be exactly the minimum / mean / maximum of H-AP over all
orderings, for 1 to 4 label levels and alpha 1, 3 and 5. The orderings come from the float64 brute-force oracle
(every permutation of every tie group), H-AP from HAPPIER Eq. 3 one ordering at a time.
"""

from __future__ import annotations

import itertools
import random

import pytest
import torch

from ranklit.functional.metrics._retrieval import retrieval_metric_tensors
from tests.oracles.metrics import _extreme_hap, _ordered_hierarchical, tie_orderings

POLICIES = ("pessimistic", "average", "optimistic")
ALPHAS = (1.0, 3.0, 5.0)
# The issue's example: with 3 levels the 5 items of level 3 are the least relevant (1/5 each, level 2: 2/3, level 1:
# 1/3), so ordering the top tie group by level gave H-AP's maximum under "pessimistic".
EXAMPLE = ([1, 3, 3, 3, 3, 0, 2], [1, 3, 3, 3, 2, 3, 3])


def _cases(num_levels: int, count: int, seed: int) -> list[tuple[list[int], list[int]]]:
    """``count`` queries of 3 to 7 items: scores in 0..3 (tie groups of a few items), levels in 0..L, one >= 1."""
    rng = random.Random(seed)
    cases = []
    while len(cases) < count:
        size = rng.randint(3, 7)
        levels = [rng.randint(0, num_levels) for _ in range(size)]
        if any(levels):
            cases.append(([rng.randint(0, 3) for _ in range(size)], levels))
    return cases


def _policy_values(cases: list[tuple[list[int], list[int]]], num_levels: int, alpha: float, ties: str) -> torch.Tensor:
    """H-AP of every case by `retrieval_metric_tensors`, all cases in one call (AP for one level: H-AP = AP).

    Query ``c`` is the unit vector ``e_c``; item ``j`` of case ``c`` is ``(score_j + 1) e_c``, so query ``c`` scores
    the items of its own case 1 to 4 and every other item 0, below them all. Labels: column ``h`` is the query's
    (case ``c``) for the items of level ``>= L - h``, and an id of the item's own otherwise, so the other cases' items
    are level 0 for query ``c``.
    """
    num_cases = len(cases)
    queries = torch.eye(num_cases, dtype=torch.float64)
    gallery, gallery_labels = [], []
    for c, (scores, levels) in enumerate(cases):
        for score, level in zip(scores, levels, strict=True):
            item = len(gallery_labels)
            gallery.append(torch.zeros(num_cases, dtype=torch.float64).index_fill_(0, torch.tensor(c), score + 1.0))
            gallery_labels.append([c if h >= num_levels - level else num_cases + item for h in range(num_levels)])
    query_labels = torch.arange(num_cases)[:, None].expand(num_cases, num_levels)
    ref_labels = torch.tensor(gallery_labels)
    if num_levels == 1:
        query_labels, ref_labels = query_labels[:, 0], ref_labels[:, 0]
    out = retrieval_metric_tensors(queries, query_labels, ref_embeddings=torch.stack(gallery), ref_labels=ref_labels,
                                   alpha=alpha, ties=ties, per_query=True, normalize=False)
    return out["hap" if num_levels > 1 else "map"]


@pytest.mark.parametrize("num_levels", [1, 2, 3, 4])
def test_hap_policies_are_the_min_mean_and_max_over_every_ordering(num_levels: int) -> None:
    """20 random queries per (levels, alpha), and the issue's example: 243 cases in all over the four levels."""
    discriminating = 0
    for alpha in ALPHAS:
        cases = _cases(num_levels, 20, seed=100 * num_levels + int(alpha))
        if num_levels == 3:
            cases.append(EXAMPLE)
        expected = {policy: [] for policy in POLICIES}
        for scores, levels in cases:
            every = [_ordered_hierarchical(order, levels, num_levels, alpha)["hap"]
                     for order in tie_orderings(scores, levels, "average")]
            expected["pessimistic"].append(min(every))
            expected["average"].append(sum(every) / len(every))
            expected["optimistic"].append(max(every))
            by_level = [_ordered_hierarchical(tie_orderings(scores, levels, t)[0], levels, num_levels, alpha)["hap"]
                        for t in ("pessimistic", "optimistic")]
            discriminating += by_level != pytest.approx([min(every), max(every)], rel=1e-9)
        for policy in POLICIES:
            got = _policy_values(cases, num_levels, alpha, policy)
            want = torch.tensor(expected[policy], dtype=torch.float64)
            torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12, msg=f"{policy}, alpha={alpha}")
    if num_levels >= 2:  # cases where ordering each tie group by level misses H-AP's extremes are among them
        assert discriminating >= 2, discriminating


def test_the_issue_example_by_hand() -> None:
    """Ranked by score, positions 1-4 hold the tie group of levels 3, 3, 3, 2 (score 3), then come levels 3, 1 and
    3; relevances: level 1 is 1/3, level 2 is 2/3, level 3 is 1/5 (five items). "pessimistic" and "optimistic" are
    the least and the largest H-AP over the orderings of the group, and ordering the group by level (level 3 last)
    gives the largest, not the least."""
    scores, levels = EXAMPLE
    rel = {1: 1 / 3, 2: 2 / 3, 3: 1 / 5}
    total = rel[1] + rel[2] + 5 * rel[3]

    def hap(group: tuple[int, ...]) -> float:  # HAPPIER Eq. 3 for the group's levels at positions 1..4
        order = [*group, 3, 1, 3]
        value = 0.0
        for position, level in enumerate(order, start=1):
            h_rank = rel[level] + sum(min(rel[level], rel[other]) for other in order[: position - 1])
            value += h_rank / position
        return value / total

    values = [hap(group) for group in itertools.permutations([3, 3, 3, 2])]
    assert hap((2, 3, 3, 3)) == pytest.approx(max(values)) and max(values) - min(values) > 0.1
    got = [float(_policy_values([(scores, levels)], 3, 1.0, t)[0]) for t in ("pessimistic", "optimistic")]
    assert got == pytest.approx([min(values), max(values)], rel=1e-12)


def test_the_oracles_group_by_group_extremes_are_those_of_every_ordering() -> None:
    """`oracle_query` finds H-AP's extremes one tie group at a time (the full enumeration is too long for the other
    tests' groups): the same values as every ordering at once."""
    rng = random.Random(7)
    for num_levels in (2, 3, 4):
        for scores, levels in _cases(num_levels, 10, seed=rng.randrange(1000)):
            alpha = rng.choice(ALPHAS)
            every = [_ordered_hierarchical(order, levels, num_levels, alpha)["hap"]
                     for order in tie_orderings(scores, levels, "average")]
            extremes = [_extreme_hap(scores, levels, num_levels, alpha, best) for best in (False, True)]
            assert extremes == pytest.approx([min(every), max(every)], rel=1e-12)
