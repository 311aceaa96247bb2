"""The built-in synthetic hierarchy: deterministic, class-disjoint splits, consistent hierarchy, not trivial."""

from __future__ import annotations

import pytest
import torch

from ranklit.data import SyntheticHierarchy
from ranklit.functional.inputs import check_hierarchy

SMALL = {"num_coarse": 3, "fine_per_parent": 4, "images_per_class": 4, "image_size": 16}


@pytest.mark.parametrize("levels", [2, 3])
def test_labels_form_a_consistent_hierarchy(levels: int) -> None:
    data = SyntheticHierarchy(split="train", levels=levels, **SMALL)
    assert data.labels.shape == (len(data), levels)
    check_hierarchy(data.labels)
    assert int(data.labels[:, -1].max()) + 1 == SMALL["num_coarse"]
    assert data.num_classes == int(data.labels[:, 0].unique().numel())


def test_same_seed_same_images_other_seed_other_images() -> None:
    a, b = SyntheticHierarchy(seed=3, **SMALL), SyntheticHierarchy(seed=3, **SMALL)
    c = SyntheticHierarchy(seed=4, **SMALL)
    assert torch.equal(a.images, b.images) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.images, c.images)


def test_train_and_test_fine_classes_are_disjoint() -> None:
    train, test = SyntheticHierarchy(split="train", **SMALL), SyntheticHierarchy(split="test", **SMALL)
    # images of different splits never coincide, and each split has half the fine classes of every shape
    assert train.num_classes == test.num_classes == SMALL["num_coarse"] * SMALL["fine_per_parent"] // 2
    assert not any(torch.equal(train.images[i], test.images[i]) for i in range(len(train)))


def test_items_carry_image_label_and_global_index() -> None:
    data = SyntheticHierarchy(split="test", transform=lambda x: x.float() / 255, **SMALL)
    item = data[5]
    assert item["index"] == 5 and torch.equal(item["label"], data.labels[5])
    assert item["image"].dtype == torch.float32 and item["image"].shape == (3, 16, 16)


def test_mean_colour_alone_does_not_separate_the_fine_classes() -> None:
    """Nearest-neighbour retrieval on mean RGB must be far from perfect (the dataset is not trivially separable)."""
    data = SyntheticHierarchy(split="test", num_coarse=4, fine_per_parent=8, images_per_class=8, image_size=24)
    colour = data.images.float().mean(dim=(2, 3))
    distances = torch.cdist(colour, colour).fill_diagonal_(float("inf"))
    nearest = distances.argmin(dim=1)
    precision_at_1 = (data.labels[nearest, 0] == data.labels[:, 0]).float().mean()
    assert precision_at_1 < 0.5


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"split": "val"}, "split"), ({"levels": 4}, "levels"), ({"fine_per_parent": 3}, "fine_per_parent")],
)
def test_invalid_options_are_rejected(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SyntheticHierarchy(**{**SMALL, **kwargs})
