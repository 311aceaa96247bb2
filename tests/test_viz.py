"""``ranklit.viz``: top-k retrieval against a brute-force loop, frame colours, image conversions and the figures."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import torch
from torchvision.transforms import v2

from ranklit.viz import (
    Retrieved,
    class_means,
    dataset_images,
    embedding_map,
    figure_to_array,
    gap_figure,
    image_grid,
    level_colour,
    metric_curves,
    ranking_grid,
    retrieve,
    step_functions_figure,
    to_display,
)


def _brute_force_top_k(queries, labels, refs, ref_labels, top_k, q_ids=None, r_ids=None):  # type: ignore[no-untyped-def]
    """Loop over queries: sort the allowed items by score, level = agreeing columns counted from the coarsest."""
    rows_idx, rows_lvl = [], []
    for q in range(queries.shape[0]):
        allowed = [j for j in range(refs.shape[0]) if q_ids is None or int(q_ids[q]) != int(r_ids[j])]
        ranked = sorted(allowed, key=lambda j: -float(queries[q] @ refs[j]))[:top_k]
        levels = []
        for j in ranked:
            level = 0
            for h in reversed(range(labels.shape[1])):
                if labels[q, h] != ref_labels[j, h]:
                    break
                level += 1
            levels.append(level)
        rows_idx.append(ranked)
        rows_lvl.append(levels)
    return rows_idx, rows_lvl


def _hierarchy(n: int, generator: torch.Generator) -> torch.Tensor:
    fine = torch.randint(0, 6, (n,), generator=generator)
    return torch.stack([fine, fine // 2, fine // 4], dim=1)


def test_retrieve_matches_brute_force_in_batch() -> None:
    g = torch.Generator().manual_seed(1)
    e = torch.nn.functional.normalize(torch.randn(12, 5, generator=g), dim=1)
    labels = _hierarchy(12, g)
    r = retrieve(e, labels, top_k=4)
    indices, levels = _brute_force_top_k(e, labels, e, labels, 4, torch.arange(12), torch.arange(12))
    assert r.indices.tolist() == indices and r.levels.tolist() == levels and r.num_levels == 3
    assert torch.allclose(r.scores, torch.stack([e[q] @ e[r.indices[q]].T for q in range(12)]))


def test_retrieve_against_a_gallery_excludes_by_id_only() -> None:
    g = torch.Generator().manual_seed(2)
    queries, refs = (torch.nn.functional.normalize(torch.randn(n, 4, generator=g), dim=1) for n in (3, 9))
    q_labels, r_labels = _hierarchy(3, g), _hierarchy(9, g)
    plain = retrieve(queries, q_labels, ref_embeddings=refs, ref_labels=r_labels, top_k=9)
    assert plain.indices.tolist() == _brute_force_top_k(queries, q_labels, refs, r_labels, 9)[0]
    ids, ref_ids = torch.tensor([4, 0, 8]), torch.arange(9)
    excluded = retrieve(queries, q_labels, ref_embeddings=refs, ref_labels=r_labels, ids=ids, ref_ids=ref_ids, top_k=8)
    expected = _brute_force_top_k(queries, q_labels, refs, r_labels, 8, ids, ref_ids)
    assert excluded.indices.tolist() == expected[0] and excluded.levels.tolist() == expected[1]


def test_retrieve_flat_labels_give_one_level() -> None:
    e = torch.nn.functional.normalize(torch.randn(4, 3), dim=1)
    r = retrieve(e, torch.tensor([0, 0, 1, 1]), top_k=3)
    assert r.num_levels == 1 and set(r.levels.flatten().tolist()) <= {0, 1}
    assert r.levels.sum(1).tolist() == [1, 1, 1, 1]  # each query has exactly one positive among the others


@pytest.mark.parametrize("top_k", [0, 4, 2.0])
def test_retrieve_rejects_top_k_beyond_the_retrieval_set(top_k: object) -> None:
    with pytest.raises(ValueError, match="top_k"):
        retrieve(torch.eye(4), torch.arange(4), top_k=top_k)  # type: ignore[arg-type]


def test_level_colours() -> None:
    assert level_colour(3, 3) == level_colour(1, 1) != level_colour(2, 3) != level_colour(0, 3)
    assert level_colour(1, 3) == level_colour(2, 3)


def test_to_display_undoes_the_normalisation_and_scales_uint8() -> None:
    images = torch.randint(0, 256, (2, 3, 5, 5), dtype=torch.uint8)
    expected = images.permute(0, 2, 3, 1).numpy() / 255.0
    assert np.allclose(to_display(images), expected)
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    normalised = v2.Normalize(mean, std)(images.float() / 255.0)
    assert np.allclose(to_display(normalised, mean, std), expected, atol=1e-6)
    rescaled = to_display(normalised)
    assert rescaled.min() == 0.0 and rescaled.max() == 1.0
    assert to_display(torch.zeros(1, 1, 2, 2)).shape == (1, 2, 2, 3)


def test_to_display_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match=r"\[N, C, H, W\]"):
        to_display(torch.zeros(3, 4, 4))
    with pytest.raises(ValueError, match="together"):
        to_display(torch.zeros(1, 3, 4, 4), mean=(0.5, 0.5, 0.5))


def _frame_colours(fig, column_count: int) -> list[str]:  # type: ignore[no-untyped-def]
    from matplotlib.colors import to_hex

    return [to_hex(ax.spines["top"].get_edgecolor()) for ax in fig.axes[column_count:]]


def test_ranking_grid_frames_items_by_level() -> None:
    retrieved = Retrieved(
        indices=torch.tensor([[1, 2, 0], [0, 2, 1]]),
        scores=torch.ones(2, 3),
        levels=torch.tensor([[2, 1, 0], [0, 0, 2]]),
        num_levels=2,
    )
    images = torch.randint(0, 256, (3, 3, 6, 6), dtype=torch.uint8)
    fig = ranking_grid(images[:2], retrieved, images)
    assert len(fig.axes) == 2 * 4
    expected = [level_colour(int(v), 2) for v in retrieved.levels.flatten()]
    assert _frame_colours(fig, 2) == expected
    shown = fig.axes[2].get_images()[0].get_array()
    assert np.allclose(shown, images[1].permute(1, 2, 0).numpy() / 255.0)  # first item of query 0 is image 1


def test_ranking_grid_of_unlabelled_items_frames_them_grey_without_a_legend() -> None:
    """A search index's results have no labels (``num_levels = 0``): no frame may claim a class relation."""
    levels = torch.zeros(1, 2, dtype=torch.long)
    retrieved = Retrieved(indices=torch.tensor([[1, 0]]), scores=torch.ones(1, 2), levels=levels, num_levels=0)
    images = torch.randint(0, 256, (2, 3, 6, 6), dtype=torch.uint8)
    fig = ranking_grid(images[:1], retrieved, images)
    assert _frame_colours(fig, 1) == ["#7f7f7f", "#7f7f7f"] and not fig.legends
    assert ranking_grid(images[:1], Retrieved(retrieved.indices, retrieved.scores, retrieved.levels, 1), images).legends


def test_ranking_grid_side_by_side_loads_only_the_shown_items() -> None:
    requested: list[list[int]] = []

    def load(positions: torch.Tensor) -> torch.Tensor:
        requested.append(positions.tolist())
        return torch.zeros(len(positions), 3, 4, 4)

    e = torch.nn.functional.normalize(torch.randn(20, 3), dim=1)
    zeros = torch.zeros(20, dtype=torch.long)
    a = retrieve(e[:2], zeros[:2], ref_embeddings=e, ref_labels=zeros, top_k=2)
    fig = ranking_grid(torch.zeros(2, 3, 4, 4), [a, a], load, titles=["A", "B"], show_scores=False)
    assert requested == [a.indices.flatten().tolist()] * 2
    assert [ax.get_title(loc="left") for ax in fig.axes if ax.get_title(loc="left")] == ["A", "B"]


def test_ranking_grid_rejects_mismatched_rankings() -> None:
    r = retrieve(torch.eye(3), torch.arange(3), top_k=2)
    with pytest.raises(ValueError, match="one row per query"):
        ranking_grid(torch.zeros(2, 3, 4, 4), r, torch.zeros(3, 3, 4, 4))
    with pytest.raises(ValueError, match="titles"):
        ranking_grid(torch.zeros(3, 3, 4, 4), [r, r], torch.zeros(3, 3, 4, 4), titles=["one"])
    with pytest.raises(ValueError, match="empty"):
        ranking_grid(torch.zeros(3, 3, 4, 4), [], torch.zeros(3, 3, 4, 4))


def test_dataset_images_keeps_the_index_shape() -> None:
    data = [{"image": torch.full((3, 2, 2), i)} for i in range(5)]
    out = dataset_images(data, torch.tensor([[4, 0], [2, 2]]))
    assert out.shape == (2, 2, 3, 2, 2) and out[:, :, 0, 0, 0].tolist() == [[4, 0], [2, 2]]


def test_class_means_match_a_loop() -> None:
    g = torch.Generator().manual_seed(3)
    e = torch.randn(30, 4, generator=g, dtype=torch.float64)
    labels = _hierarchy(30, g)
    means, rows = class_means(e, labels)
    for c, fine in enumerate(sorted(set(labels[:, 0].tolist()))):
        members = labels[:, 0] == fine
        assert torch.allclose(means[c], torch.nn.functional.normalize(e[members].mean(0), dim=0))
        assert rows[c].tolist() == labels[members][0].tolist()


def test_embedding_map_colours_each_group() -> None:
    fig = embedding_map(np.random.rand(6, 2), np.array([0, 0, 1, 1, 2, 2]), names=["a", "b", "c"], title="t")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "b", "c"]
    colours = {tuple(c.get_facecolor()[0]) for c in ax.collections}
    assert len(colours) == 3
    with pytest.raises(ValueError, match=r"\[C, 2\]"):
        embedding_map(np.zeros((3, 3)), np.zeros(3))


def test_step_functions_figure_shows_the_bounds() -> None:
    fig = step_functions_figure()
    left, right = fig.axes
    heaviside, upper, sigmoid = (line.get_ydata() for line in left.get_lines()[:3])
    assert (upper >= heaviside).all() and not (sigmoid >= heaviside).all()
    heaviside, lower = (line.get_ydata() for line in right.get_lines()[:2])
    assert (lower <= heaviside).all()


def test_gap_figure_rejects_wrong_lengths() -> None:
    with pytest.raises(ValueError, match="batch sizes"):
        gap_figure([8, 16], {"a": [0.1]})


def test_metric_curves_reads_a_csv_logger_file(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, ["epoch", "step", "train/loss", "val/map_at_r"])
        writer.writeheader()
        writer.writerows([
            {"epoch": 0, "step": 0, "train/loss": "", "val/map_at_r": 0.1},
            {"epoch": 0, "step": 4, "train/loss": 0.9, "val/map_at_r": ""},
            {"epoch": 1, "step": 9, "train/loss": "", "val/map_at_r": 0.3},
        ])
    fig = metric_curves(path, ["val/map_at_r", "train/loss"])
    assert fig.axes[0].get_lines()[0].get_ydata().tolist() == [0.1, 0.3]
    with pytest.raises(ValueError, match="val/hap"):
        metric_curves(path, ["val/hap"])


def test_figure_to_array_renders_rgb() -> None:
    fig = step_functions_figure()
    array = figure_to_array(fig, dpi=20)
    assert array.dtype == np.uint8 and array.shape == (76, 200, 3) and array.std() > 0


def test_image_grid_shows_every_image_with_its_title() -> None:
    images = torch.randint(0, 256, (5, 3, 4, 4), dtype=torch.uint8)
    fig = image_grid(images, [f"#{i}" for i in range(5)], ncols=2)
    assert [ax.get_title() for ax in fig.axes] == [f"#{i}" for i in range(5)]
    assert np.allclose(fig.axes[3].get_images()[0].get_array(), images[3].permute(1, 2, 0).numpy() / 255.0)
    with pytest.raises(ValueError, match="titles"):
        image_grid(images, ["a"])
