"""The binned counts (issue 31) give exactly today's counts, hence bit-identical metrics.

``count_at_least_by_bins`` replaced, on CPU, the binary search of every item that counted the items at or above more
than 64 thresholds per row (hierarchical labels: one threshold per relevant item). The counts are checked against a
brute-force comparison of every item with every threshold, on scores built to break a binning: exact ties, thresholds
one float apart, many thresholds per bin, rows of padding, removed items, a single distinct threshold, float64, large
unnormalised scores. The metrics are checked bit for bit against today's route, the binary search kept below as it was
(``_searched_counts``), for 2 and 3 label levels, with and without a gallery, every tie policy, chunked or not.
"""

from __future__ import annotations

import pytest
import torch

from ranklit.functional.metrics import _binned_counts, _counting
from ranklit.functional.metrics._binned_counts import count_at_least_by_bins
from ranklit.functional.metrics._retrieval import retrieval_metric_tensors


def _searched_counts(scores: torch.Tensor, descending: torch.Tensor) -> torch.Tensor:
    """Today's (before issue 31) count on CPU beyond 64 thresholds: a binary search of every item, a histogram."""
    width = descending.shape[1]
    below = torch.searchsorted(descending.flip(1).contiguous(), scores.contiguous(), right=True)
    histogram = torch.zeros(scores.shape[0], width + 1, dtype=torch.int64)
    histogram.scatter_add_(1, below, below.new_ones(1).expand_as(below))
    return histogram[:, 1:].flip(1).cumsum(1)


def _brute_force(scores: torch.Tensor, thresholds: torch.Tensor) -> torch.Tensor:
    return (scores[:, None, :] >= thresholds[:, :, None]).sum(-1)


def _thresholds_from(scores: torch.Tensor, picks: int, generator: torch.Generator) -> torch.Tensor:
    """``picks`` scores of each row (so thresholds tie with items), in decreasing order, with ``-inf`` padding."""
    columns = torch.rand(scores.shape[0], scores.shape[1], generator=generator).argsort(1)[:, :picks]
    chosen = scores.gather(1, columns)
    chosen[torch.rand(chosen.shape, generator=generator) < 0.2] = float("-inf")  # rows with fewer real thresholds
    return chosen.sort(1, descending=True).values


def _score_cases() -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(31)
    cases = []
    few_values = torch.randint(0, 6, (9, 70), generator=g).float() / 5  # many exact ties
    cases.append(("ties", few_values, _thresholds_from(few_values, 12, g)))
    smooth = torch.randn(9, 300, generator=g)
    smooth[:, :5] = float("-inf")  # removed items
    cases.append(("smooth", smooth, _thresholds_from(smooth[:, 5:], 40, g)))
    ulps = torch.full((5, 80), 0.5)
    ulps[:, ::2] = torch.nextafter(torch.tensor(0.5), torch.tensor(1.0))
    ulps[:, ::3] = torch.nextafter(torch.tensor(0.5), torch.tensor(0.0))
    ulps[:, 1] = 0.9  # a far threshold: the three close values share a bin
    cases.append(("one ulp apart", ulps, _thresholds_from(ulps, 20, g)))
    single = torch.randn(4, 50, generator=g)
    cases.append(("one distinct threshold", single, single[:, :1].expand(4, 6).contiguous()))
    padding = torch.randn(3, 50, generator=g)
    cases.append(("rows of padding", padding, torch.full((3, 4), float("-inf"))))
    wide = torch.randn(6, 200, generator=g, dtype=torch.float64) * 1e6
    cases.append(("float64, large scores", wide, _thresholds_from(wide, 30, g)))
    return cases


@pytest.mark.parametrize(("bins", "tile"), [(4096, 2**19), (8, 2**19), (4, 100)])  # default, crowded, tiles
def test_counts_equal_the_brute_force_and_todays_search(bins: int, tile: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_binned_counts, "_BINS", bins)
    monkeypatch.setattr(_binned_counts, "_TILE_ELEMENTS", tile)
    for name, scores, thresholds in _score_cases():
        got = count_at_least_by_bins(scores, thresholds)
        real = torch.isfinite(thresholds)
        assert got.dtype == torch.int64 and got.shape == thresholds.shape, name
        assert torch.equal(got[real], _brute_force(scores, thresholds)[real]), name
        assert torch.equal(got[real], _searched_counts(scores, thresholds)[real]), name


def _hierarchy(n: int, num_levels: int, generator: torch.Generator) -> torch.Tensor:
    fine = torch.randint(0, 12, (n,), generator=generator)
    return torch.stack([fine // 2**h for h in range(num_levels)], 1)


def _embeddings(n: int, generator: torch.Generator) -> torch.Tensor:
    """Rounded to few values, with duplicates: many exact score ties, within and across label levels."""
    e = (torch.randn(n, 6, generator=generator) * 2).round() / 2
    e[n // 2 :: 5] = e[: n // 10 + 1][: e[n // 2 :: 5].shape[0]]
    return e


@pytest.mark.parametrize(("num_levels", "seed"), [(2, 0), (3, 1)])
def test_hierarchical_metrics_bit_identical_to_todays(
    num_levels: int, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = torch.Generator().manual_seed(seed)
    e, labels = _embeddings(60, g), _hierarchy(60, num_levels, g)
    gallery, gallery_labels = _embeddings(50, g), _hierarchy(50, num_levels, g)
    monkeypatch.setattr(_counting, "_MAX_PASSES", 2)  # every query has more relevant items: the binned path
    monkeypatch.setattr(_counting, "worth_finding", lambda *args: False)
    monkeypatch.setattr(_binned_counts, "_BINS", 16)  # crowded bins: many items compared exactly
    binned_calls = []
    binned = _binned_counts.count_at_least_by_bins
    monkeypatch.setattr(_binned_counts, "count_at_least_by_bins", lambda *a: binned_calls.append(1) or binned(*a))
    queries = dict(embeddings=e[:20], labels=labels[:20], ref_embeddings=gallery, ref_labels=gallery_labels)
    cases = [dict(embeddings=e, labels=labels), dict(embeddings=e, labels=labels, chunk_size=7), queries,
             dict(queries, chunk_size=3)]
    for ties in ("pessimistic", "average", "optimistic"):
        for kwargs in cases:
            new = retrieval_metric_tensors(**kwargs, ties=ties, per_query=True)
            with monkeypatch.context() as today:
                today.setattr(_binned_counts, "count_at_least_by_bins", _searched_counts)
                old = retrieval_metric_tensors(**kwargs, ties=ties, per_query=True)
            assert new.keys() == old.keys()
            for key in new:
                assert torch.equal(new[key].nan_to_num(-7.0), old[key].nan_to_num(-7.0)), (ties, key, kwargs.keys())
    assert len(binned_calls) >= 12
