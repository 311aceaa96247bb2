"""The symmetric path of `retrieval_metrics` (each pair's score computed once, in class-aligned tiles) against the
brute-force oracle, against the row-by-row path, and the pieces it is built from."""

from __future__ import annotations

import functools
import itertools
import math

import pytest
import torch

from ranklit.functional.metrics import _counting
from ranklit.functional.metrics import _retrieval as metrics
from ranklit.functional.metrics import _symmetric_ranks as symmetric_ranks
from ranklit.functional.metrics._counting import count_at_least
from ranklit.functional.metrics._symmetric_ranks import class_blocks
from tests.oracles import metrics as oracle

# The ranking arithmetic on raw dot products (integer coordinates give exact ties); normalisation: test_raw_inputs.py
retrieval_metrics = functools.partial(metrics.retrieval_metrics, normalize=False)
oracle_retrieval_metrics = functools.partial(oracle.oracle_retrieval_metrics, normalize=False)


def _assert_close(got: dict, expected: dict) -> None:
    assert set(got) == set(expected), set(got) ^ set(expected)
    for key, value in expected.items():
        assert math.isclose(got[key], value, rel_tol=1e-9, abs_tol=1e-12), (key, got[key], value)


def _uses_symmetric_path(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the blocks the symmetric path yields (it must be the path taken)."""
    blocks: list[int] = []
    original = symmetric_ranks.symmetric_positive_counts

    def counting(*args, **kwargs):
        for ranks in original(*args, **kwargs):
            blocks.append(ranks[0].shape[0])
            yield ranks

    monkeypatch.setattr("ranklit.functional.metrics._retrieval.symmetric_positive_counts", counting)
    return blocks


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize(("ties", "policy"), [(False, "pessimistic"), (True, "pessimistic"), (True, "optimistic")])
@pytest.mark.parametrize("tile", [12, 24, 200])
@pytest.mark.usefixtures("counting")
def test_symmetric_path_matches_the_oracle(
    tile: int, ties: bool, policy: str, dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = torch.Generator().manual_seed(tile + int(ties))
    if ties:  # small integer coordinates: many exactly equal scores, exact in float32 too
        e = torch.randint(-2, 3, (70, 3), generator=g).to(dtype)
    else:
        e = torch.nn.functional.normalize(torch.randn(70, 5, generator=g, dtype=dtype), dim=1)
    labels = torch.randint(0, 20, (70,), generator=g)  # classes of 1 to about 10 items, some singletons
    labels[:3] = 99  # a class of 3 ...
    labels[3] = 100  # ... and a singleton query without positive
    blocks = _uses_symmetric_path(monkeypatch)
    got = retrieval_metrics(e, labels, recall_at=(1, 2, 5), chunk_size=tile, ties=policy)
    assert sum(blocks) == 70 and (len(blocks) > 2) == (tile < 35)
    _assert_close(got, oracle_retrieval_metrics(e, labels, recall_at=(1, 2, 5), ties=policy))


@pytest.mark.usefixtures("counting")
def test_duplicated_float32_embeddings_tie_across_tiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ties between items of different tiles need each pair's float32 score to be the same number wherever the tile
    product computes it: copies of random (non-integer) vectors under other labels must still tie exactly."""
    g = torch.Generator().manual_seed(5)
    base = torch.nn.functional.normalize(torch.randn(40, 24, generator=g), dim=1)
    e = torch.cat([base, base[torch.randperm(40, generator=g)], base[:20]])  # every vector at least twice
    labels = torch.randint(0, 25, (100,), generator=g)
    blocks = _uses_symmetric_path(monkeypatch)
    got = retrieval_metrics(e, labels, chunk_size=12)
    assert len(blocks) > 4
    _assert_close(got, oracle_retrieval_metrics(e, labels))


@pytest.mark.parametrize("ties", ["pessimistic", "average", "optimistic"])
@pytest.mark.usefixtures("counting")
def test_symmetric_and_row_paths_agree(ties: str) -> None:
    g = torch.Generator().manual_seed(2)
    e = torch.randint(-2, 3, (150, 3), generator=g).float()  # many ties (the oracle of "average" is too slow here)
    labels = torch.randint(0, 20, (150,), generator=g)
    ids = torch.arange(150)
    by_rows = retrieval_metrics(e, labels, ref_embeddings=e, ref_labels=labels, ids=ids, ref_ids=ids, ties=ties)
    assert retrieval_metrics(e, labels, chunk_size=32, ties=ties) == pytest.approx(by_rows, rel=1e-12)
    assert retrieval_metrics(e, labels, ties=ties) == pytest.approx(by_rows, rel=1e-12)


def test_classes_larger_than_the_tile_fall_back_to_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    g = torch.Generator().manual_seed(3)
    e = torch.nn.functional.normalize(torch.randn(40, 4, generator=g, dtype=torch.float64), dim=1)
    labels = torch.arange(40) % 3  # classes of 13-14 items
    blocks = _uses_symmetric_path(monkeypatch)
    _assert_close(retrieval_metrics(e, labels, chunk_size=10), oracle_retrieval_metrics(e, labels))
    assert blocks == []
    retrieval_metrics(e, labels, chunk_size=14)
    assert sum(blocks) == 40


def test_repeated_ids_take_the_row_path(monkeypatch: pytest.MonkeyPatch) -> None:
    e = torch.nn.functional.normalize(torch.randn(20, 3, generator=torch.Generator().manual_seed(7)), dim=1)
    blocks = _uses_symmetric_path(monkeypatch)
    ids = torch.arange(20) % 10
    labels = torch.arange(20) % 4
    _assert_close(retrieval_metrics(e, labels, ids=ids), oracle_retrieval_metrics(e, labels, ids=ids))
    assert blocks == []


@pytest.mark.parametrize("tile", [1, 3, 8, 1000])
def test_class_blocks_hold_whole_classes_in_size_order(tile: int) -> None:
    labels = torch.randint(0, 12, (60,), generator=torch.Generator().manual_seed(tile))
    order, blocks = class_blocks(labels, tile)
    assert sorted(order.tolist()) == list(range(60))
    assert blocks[0][0] == 0 and blocks[-1][1] == 60
    assert all(a[1] == b[0] for a, b in itertools.pairwise(blocks))
    sorted_labels = labels[order]
    sizes = (labels[:, None] == labels[None, :]).sum(1)[order]
    assert torch.all(sizes[1:] >= sizes[:-1])  # classes by increasing size
    for start, stop in blocks:
        inside = set(sorted_labels[start:stop].tolist())
        outside = set(sorted_labels[:start].tolist()) | set(sorted_labels[stop:].tolist())
        assert not inside & outside  # whole classes
        assert stop - start < tile + int(sizes[start:stop].max())


@pytest.mark.parametrize("max_passes", [64, 1])  # comparison passes; binary search (when counting by passes)
@pytest.mark.usefixtures("counting")
def test_transposed_counts_equal_row_counts(max_passes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_counting, "_MAX_PASSES", max_passes)
    g = torch.Generator().manual_seed(0)
    scores = torch.randint(0, 6, (9, 50), generator=g).float()
    thresholds = torch.cat([scores[:, :4], torch.full((9, 2), float("-inf"))], 1).sort(1, descending=True).values
    expected = (scores[:, None, :] >= thresholds[:, :, None]).sum(-1)
    real = torch.isfinite(thresholds)
    for got in (count_at_least(scores, thresholds), count_at_least(scores.T.contiguous(), thresholds, transposed=True)):
        assert torch.equal(got[real], expected[real])


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("small_blocks", [False, True])  # rows searched and items placed in small groups
def test_items_clearing_the_lowest_threshold_give_the_exact_counts(
    transposed: bool, small_blocks: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counting from the items at or above each row's lowest threshold, on many small random cases with ties, rows of
    padding only and removed items (``-inf``), against the definition."""
    if small_blocks:
        monkeypatch.setattr(_counting, "_BLOCK_ELEMENTS", 40)
        monkeypatch.setattr(_counting, "_PLACE_ELEMENTS", 7)
    for cost in ("_FIND_COST", "_PLACE_BASE", "_PLACE_PER_THRESHOLD"):
        monkeypatch.setattr(_counting, cost, 0.0)
    g = torch.Generator().manual_seed(11)
    for _ in range(100):
        rows, items, width = (int(torch.randint(1, high, (1,), generator=g)) for high in (8, 50, 9))
        scores = torch.randint(0, 8, (rows, items), generator=g).float()
        scores[:, :2] = float("-inf")
        real = torch.arange(width)[None, :] < torch.randint(0, width + 1, (rows, 1), generator=g)
        thresholds = torch.where(real, torch.randint(0, 12, (rows, width), generator=g).float(), float("-inf"))
        thresholds = thresholds.sort(1, descending=True).values
        got = _counting._count_at_least_above_lowest(scores.T if transposed else scores, thresholds, transposed)
        assert got is not None
        expected = (scores[:, None, :] >= thresholds[:, :, None]).sum(-1)
        real = torch.isfinite(thresholds)
        assert torch.equal(got[real], expected[real])
