"""Revisited Oxford/Paris protocols against a brute-force walk down each ranking."""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from ranklit.functional import retrieval_metrics
from ranklit.index import ConcatenatedDescriptors, DescriptorShards, DescriptorWriter
from ranklit.landmarks import RevisitedLandmarks
from ranklit.landmarks._revisited_map import revisited_map
from ranklit.landmarks.postprocess import AlphaQueryExpansion, DatabaseAugmentation, alpha_query_expansion
from tests.oracles.landmarks import official_revisited, oracle_alpha_qe, oracle_dba
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


def _tied_directions(count: int, seed: int) -> torch.Tensor:
    """Unit rows along 4 directions: rows of a direction, and directions symmetric about a query, score alike."""
    g = torch.Generator().manual_seed(seed)
    directions = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, -1.0]], dtype=torch.float64)
    return torch.nn.functional.normalize(directions, dim=1)[torch.randint(0, 4, (count,), generator=g)]


@pytest.mark.parametrize("trapezoid", [False, True])
@pytest.mark.parametrize("ties", ["pessimistic", "average", "optimistic"])
def test_tie_policies_against_all_orderings(ties: str, trapezoid: bool) -> None:
    """Every ordering of each tie group of the kept items (junk removed first), brute force, AP and mP@k."""
    for seed in range(3):
        queries, gallery = _tied_directions(3, 10 + seed), _tied_directions(10, 20 + seed)
        gnd = _gnd(3, 10, seed)
        got = revisited_map(queries, gallery, gnd, precision_at=(1, 2, 5), trapezoid=trapezoid, ties=ties, chunk_size=2)
        expected = oracle_revisited_map(queries, gallery, gnd, trapezoid, (1, 2, 5), ties)
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-12, nan_ok=True), seed


def test_a_junk_image_tied_with_a_positive_is_not_part_of_its_tie() -> None:
    query, gallery = torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    gnd = [{"easy": [1], "hard": [2], "junk": [0]}]
    for ties in ("pessimistic", "average", "optimistic"):
        out = revisited_map(query, gallery, gnd, precision_at=(1,), ties=ties)
        assert out["map_easy"] == 1.0 and out["mp_at_1_easy"] == 1.0, ties


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
    with pytest.raises(ValueError, match="positive integers"):
        revisited_map(q, g, [{"easy": [0], "hard": [], "junk": []}] * 2, precision_at=(0,))
    with pytest.raises(ValueError, match="`ties` must be one of"):
        revisited_map(q, g, [{"easy": [0], "hard": [], "junk": []}] * 2, ties="random")
    with pytest.warns(UserWarning, match="'hard' protocol"):
        out = revisited_map(q, g, [{"easy": [0], "hard": [], "junk": []}] * 2, precision_at=(1,))
    assert math.isnan(out["map_hard"]) and math.isnan(out["mp_at_1_hard"]) and 0 < out["map_easy"] <= 1


def _unit(n: int, d: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(n, d, generator=g, dtype=torch.float64), dim=1)


def _shards(folder: Path, x: torch.Tensor, shard_rows: int) -> DescriptorShards:
    writer = DescriptorWriter(folder, shard_rows=shard_rows)
    for start in range(0, x.shape[0], 3):  # batches of 3 rows, shards of another size
        writer.append(x[start : start + 3], torch.arange(start, min(start + 3, x.shape[0])))
    writer.close()
    return DescriptorShards(folder)


@pytest.mark.parametrize(("alpha", "k"), [(2.0, 10), (0.0, 3), (3.0, 1), (1.5, 50)])
def test_alpha_query_expansion_and_dba_equal_the_float64_oracle(alpha: float, k: int) -> None:
    queries, gallery = _unit(7, 5, 0), _unit(30, 5, 1)
    q, g = queries.numpy(), gallery.numpy()
    expanded, _ = AlphaQueryExpansion(alpha=alpha, k=k)(queries, gallery)
    np.testing.assert_allclose(expanded.numpy(), oracle_alpha_qe(q, g, alpha, k), rtol=1e-12, atol=1e-12)
    same, augmented = DatabaseAugmentation(alpha=alpha, k=k, chunk_rows=7)(queries, gallery)
    assert same is queries
    np.testing.assert_allclose(augmented.numpy(), oracle_dba(g, alpha, k), rtol=1e-12, atol=1e-12)


def test_alpha_query_expansion_streams_over_shards(tmp_path: Path) -> None:
    queries, gallery = _unit(6, 8, 2).float(), _unit(50, 8, 3).float()
    shards = _shards(tmp_path, gallery, shard_rows=7)
    expected = oracle_alpha_qe(queries.double().numpy(), gallery.double().numpy(), 2.0, 10)
    np.testing.assert_allclose(alpha_query_expansion(queries, shards).numpy(), expected, rtol=1e-5, atol=1e-6)
    _, augmented = DatabaseAugmentation(k=4, chunk_rows=8)(queries, shards)
    expected_dba = oracle_dba(gallery.double().numpy(), 2.0, 4)
    np.testing.assert_allclose(augmented.numpy(), expected_dba, rtol=1e-5, atol=1e-6)


def test_query_expansion_options_are_validated() -> None:
    with pytest.raises(ValueError, match="`alpha` must be a number >= 0"):
        AlphaQueryExpansion(alpha=-1.0)
    with pytest.raises(ValueError, match="`k` must be a positive integer"):
        DatabaseAugmentation(k=0)


def _revisited_gnd(num_queries: int, num_refs: int, seed: int) -> list[dict]:
    """The official layout's lists (``bbx`` too), each query with easy, hard and junk items, the rest negatives."""
    gnd = _gnd(num_queries, num_refs, seed)
    for entry in gnd:
        entry["bbx"] = [0.0, 0.0, 1.0, 1.0]
    return gnd


@pytest.mark.parametrize("expansion", [None, AlphaQueryExpansion(alpha=2.0, k=10)], ids=["plain", "alpha_qe"])
def test_official_protocol_with_and_without_alpha_qe(expansion: AlphaQueryExpansion | None, tmp_path: Path) -> None:
    queries, gallery = _unit(8, 6, 4), _unit(60, 6, 5)
    imlist = [f"img{i}" for i in range(60)]  # a generated gnd_roxford5k.pkl in the official layout, read back
    official = {"imlist": imlist, "qimlist": [f"q{i}" for i in range(8)], "gnd": _revisited_gnd(8, 60, 6)}
    (tmp_path / "gnd_roxford5k.pkl").write_bytes(pickle.dumps(official))
    (tmp_path / "jpg").mkdir()
    for name in imlist + official["qimlist"]:  # the dataset checks that every listed image exists
        Image.new("RGB", (4, 4)).save(tmp_path / "jpg" / f"{name}.jpg")
    gnd = RevisitedLandmarks(tmp_path, "query").gnd
    if expansion is not None:
        queries, _ = expansion(queries, gallery)
    got = revisited_map(queries, gallery, gnd, precision_at=(1, 5, 10), trapezoid=True, chunk_size=3)
    expected = official_revisited(queries.numpy(), gallery.numpy(), gnd, (1, 5, 10))
    assert {k: v for k, v in got.items() if k != "num_queries"} == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert set(expected) == {f"{m}_{p}" for p in ("easy", "medium", "hard") for m in ("map", "mp_at_1", "mp_at_5",
                                                                                        "mp_at_10")}


def test_revisited_map_streams_a_gallery_on_disk(tmp_path: Path) -> None:
    queries, gallery = _unit(5, 8, 7).float(), _unit(200, 8, 8).float()
    gnd = _revisited_gnd(5, 200, 9)
    in_memory = revisited_map(queries, gallery, gnd, precision_at=(1, 5))
    assert revisited_map(queries, _shards(tmp_path, gallery, 64), gnd, precision_at=(1, 5)) == in_memory
    # a gallery in memory followed by distractors on disk, with alpha-QE over both
    both = ConcatenatedDescriptors([gallery[:50], _shards(tmp_path / "distractors", gallery[50:], 32)])
    expanded = AlphaQueryExpansion(k=5)(queries, gallery)[0]
    streamed = AlphaQueryExpansion(k=5)(queries, both)[0]
    torch.testing.assert_close(streamed, expanded)
    assert revisited_map(streamed, both, gnd, precision_at=(1,)) == pytest.approx(
        revisited_map(expanded, gallery, gnd, precision_at=(1,)), abs=1e-6
    )


def test_revisited_metrics_reorder_items_drop_padding_repeats_and_post_process() -> None:
    """Items arrive in any order (DDP shards), with the padding repeats of DistributedSampler; whitening is learnt
    from the set's whitening rows and α-QE follows, as the configured steps say."""
    from types import SimpleNamespace

    from ranklit.landmarks._whitening import learn_whitening
    from ranklit.landmarks.postprocess import LearntWhitening
    from ranklit.metrics import RevisitedMetrics

    descriptors = _unit(8 + 40 + 30, 6, 10)  # queries, gallery, whitening images
    gnd = _revisited_gnd(8, 40, 11)
    bench = SimpleNamespace(name="toy", queries=range(0, 8), gallery=range(8, 48), gnd=gnd)
    metric = RevisitedMetrics([LearntWhitening(power=0.5), AlphaQueryExpansion(k=4)], precision_at=(1, 5))
    metric.bind(SimpleNamespace(benchmarks=[bench], whitening_rows=range(48, 78)))
    order = torch.randperm(78, generator=torch.Generator().manual_seed(0))
    for ids in (order[:40], order[40:], order[:3]):  # the last batch repeats three items
        metric.update(descriptors[ids], ids)
    got = {key: float(value) for key, value in metric.compute().items()}
    whiten = learn_whitening(descriptors[48:], power=0.5)
    queries, gallery = AlphaQueryExpansion(k=4)(whiten(descriptors[:8]), whiten(descriptors[8:48]))
    expected = official_revisited(queries.numpy(), gallery.numpy(), gnd, (1, 5))
    assert got == pytest.approx({f"toy/{p}/{k}": expected[f"{k}_{p}"] for p in ("easy", "medium", "hard")
                                 for k in ("map", "mp_at_1", "mp_at_5")}, abs=1e-9)
    metric.reset()
    metric.update(descriptors[:50], torch.arange(50))
    with pytest.raises(ValueError, match="28 of the test set's items were not embedded"):
        metric.compute()
