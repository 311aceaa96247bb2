"""``CategorySampler``: FastAP's VehicleID batches, half from one labelled category, half from classes without one."""

from __future__ import annotations

import pytest
import torch

from ranklit.data import CategorySampler


def _labels(category_sizes: list[int], num_without: int, images: int = 3) -> torch.Tensor:
    """[N, 2] labels: categories of `category_sizes` fine classes, then `num_without` classes alone in their
    category."""
    supers = [s for s, size in enumerate(category_sizes) for _ in range(size)]
    supers += list(range(100, 100 + num_without))  # one fine class each: no category
    fine = torch.arange(len(supers)).repeat_interleave(images)
    return torch.stack([fine, torch.tensor(supers).repeat_interleave(images)], 1)


def test_each_batch_is_half_one_category_half_without() -> None:
    labels = _labels([6, 4, 8], num_without=10)
    sampler = CategorySampler(labels, p=4, k=3, seed=1)
    batches = list(sampler)
    for batch in batches:
        assert len(batch) == 12
        first, second = labels[batch[:6]], labels[batch[6:]]
        assert first[:, 1].unique().numel() == 1 and int(first[0, 1]) < 100  # one labelled category
        assert bool((second[:, 1] >= 100).all())  # classes without a category
        for half in (first, second):  # p // 2 classes × k images each
            assert sorted(torch.unique(half[:, 0], return_counts=True)[1].tolist()) == [3, 3]
    # 2 N_c / (p k) batches per category: 2 * 18 / 12, 2 * 12 / 12, 2 * 24 / 12
    assert len(sampler) == 3 + 2 + 4
    per_category = torch.tensor([int(labels[b[0], 1]) for b in batches]).bincount()
    assert per_category.tolist() == [3, 2, 4]


def test_epochs_differ_seeds_repeat_and_ranks_split_the_plan() -> None:
    labels = _labels([6, 6], num_without=6, images=2)
    sampler = CategorySampler(labels, p=4, k=2, seed=3)
    first = list(sampler)
    assert first == list(CategorySampler(labels, p=4, k=2, seed=3))
    sampler.set_epoch(1)
    assert list(sampler) != first
    ranks = [CategorySampler(labels, p=4, k=2, seed=3, rank=r, world_size=2) for r in (0, 1)]
    assert len(sampler) == 6 and len(ranks[0]) == len(ranks[1]) == 3  # 2 * 12 / 8 batches per category
    assert list(ranks[0]) == first[0::2] and list(ranks[1]) == first[1::2]


def test_fine_classes_are_spread_evenly_within_a_category() -> None:
    labels = _labels([4], num_without=4, images=2)
    batches = list(CategorySampler(labels, p=4, k=2))  # 2 * 8 / 8 = 2 batches of 2 + 2 classes
    labelled = torch.cat([labels[b[:4], 0] for b in batches]).unique()
    assert labelled.tolist() == [0, 1, 2, 3]  # each of the 4 category classes once over the epoch


def test_bad_configurations_are_rejected() -> None:
    labels = _labels([4], num_without=1)
    with pytest.raises(ValueError, match="`p` must be even"):
        CategorySampler(labels, p=3, k=2)
    with pytest.raises(ValueError, match=r"2 usable classes without a category \(found 1\)"):
        CategorySampler(labels, p=4, k=2)
    with pytest.raises(ValueError, match=r"\[N, L\] with L >= 2"):
        CategorySampler(labels[:, 0], p=2, k=2)
    with pytest.warns(UserWarning, match="1 categories have fewer than p // 2 = 3"):
        CategorySampler(_labels([6, 2], num_without=4), p=6, k=2)
    broken = labels.clone()
    broken[0, 1] = 7
    with pytest.raises(ValueError, match="not a hierarchy"):
        CategorySampler(broken, p=2, k=2)

