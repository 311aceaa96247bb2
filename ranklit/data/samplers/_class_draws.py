"""Per-class draws of the P×K samplers (``PKSampler``, ``HierarchicalSampler``, ``CategorySampler``): the members of
each class, the super-classes, the classes a batch may use, K images of a class, the length of an epoch. Internal: a
new sampler derives from :class:`ranklit.data.samplers.base.EpochBatchSampler` and may reuse these."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterator, Sequence

import torch
from torch import Tensor

from ranklit._checks import check_positive_int
from ranklit.data.samplers.base import EpochBatchSampler, label_matrix, option

__all__ = [
    "class_members",
    "classes_with_super_class",
    "cycled_permutation",
    "draw_classes",
    "draw_from_class",
    "eligible_classes",
    "epoch_length",
    "group_by_super_class",
    "two_level_classes",
]


def epoch_length(value: int | str, named: dict[str, float]) -> float:
    """Batches per epoch (over all ranks) from ``batches_per_epoch``: a positive integer, or one of the names of
    ``named`` (e.g. ``"images"``: one pass over the images) mapped to its number of batches.

    >>> epoch_length("images", {"images": 12.5, "classes": 2.0}), epoch_length(7, {"images": 12.5})
    (12.5, 7)
    """
    if isinstance(value, str):
        if value not in named:
            choices = " or ".join(repr(name) for name in named)
            raise ValueError(f"{option('batches_per_epoch')} must be a positive integer or {choices}, got {value!r}.")
        return named[value]
    return check_positive_int("batches_per_epoch", value)


def class_members(fine: Tensor) -> list[Tensor]:
    """For each distinct fine label (in sorted order), the dataset indices holding it (ascending)."""
    counts = torch.unique(fine, return_counts=True)[1]
    return list(torch.argsort(fine, stable=True).split(counts.tolist()))


def classes_with_super_class(
    labels: Tensor | Sequence[Sequence[int]], super_column: int
) -> tuple[list[Tensor], list[int]]:
    """The members of each fine class (as :func:`class_members`) and each fine class's super-class (column
    ``super_column``), checking that the labels form a hierarchy."""
    matrix = label_matrix(labels, 2)
    if isinstance(super_column, bool) or not isinstance(super_column, int) or not 1 <= super_column < matrix.shape[1]:
        bounds = f"a coarser column of the {matrix.shape[1]}-column labels (1..L-1)"
        raise ValueError(f"`super_column` must index {bounds}, got {super_column!r}.")
    members = class_members(matrix[:, 0])
    if len(torch.unique(matrix[:, [0, super_column]], dim=0)) != len(members):
        problem = f"some fine class (column 0) spans several super-classes (column {super_column})"
        raise ValueError(f"`labels` are not a hierarchy: {problem}; each fine label needs one super-class.")
    return members, [int(matrix[m[0], super_column]) for m in members]


def two_level_classes(
    sampler: EpochBatchSampler,
    labels: Tensor | Sequence[Sequence[int]],
    super_column: int,
    small_classes: str,
    why_even: str,
) -> tuple[list[Tensor], list[int], list[int]]:
    """The start that the two-level samplers share (``HierarchicalSampler``, ``CategorySampler``), after
    ``setup_batches``: ``p`` checked even (``why_even`` says why); the fine classes' members, their super-classes and
    the fine classes usable with ``k`` images."""
    if sampler.p % 2:
        raise ValueError(f"`p` must be even ({why_even}), got {sampler.p}.")
    members, supers = classes_with_super_class(labels, super_column)
    return members, supers, eligible_classes(members, sampler.k, small_classes, type(sampler).__name__)


def eligible_classes(members: list[Tensor], k: int, small_classes: str, owner: str) -> list[int]:
    """Positions of the classes a batch may use, warning about (and maybe skipping) classes with fewer than K images."""
    if small_classes not in ("replace", "skip"):
        raise ValueError(f"`small_classes` must be 'replace' or 'skip', got {small_classes!r}.")
    if small := [c for c, m in enumerate(members) if len(m) < k]:
        action = "skipped" if small_classes == "skip" else "completed by drawing with replacement"
        count = f"{len(small)} of {len(members)} classes have fewer than k={k} images"
        warnings.warn(f"{owner}: {count}; they are {action} (`small_classes={small_classes!r}`).", stacklevel=3)
    if small_classes == "skip":
        return [c for c, m in enumerate(members) if len(m) >= k]
    return list(range(len(members)))


def draw_from_class(members: Tensor, k: int, generator: torch.Generator) -> list[int]:
    """K indices of one class: without replacement, or every image then random repeats if the class has fewer."""
    n = len(members)
    picks = torch.randperm(n, generator=generator)[:k]
    if n < k:
        picks = torch.cat([picks, torch.randint(n, (k - n,), generator=generator)])
    return members[picks].tolist()


def group_by_super_class(
    members: list[Tensor], supers: list[int], classes: list[int], half: int, owner: str, noun: str
) -> list[list[Tensor]]:
    """The fine classes ``classes`` (positions in ``members``) grouped by super-class, in super-class order; a group
    with fewer than ``half`` fine classes cannot fill half a batch and is skipped, with a warning naming ``noun``."""
    groups: dict[int, list[Tensor]] = {}
    for c in classes:
        groups.setdefault(supers[c], []).append(members[c])
    if too_small := sorted(s for s, fine in groups.items() if len(fine) < half):
        message = f"{len(too_small)} {noun} have fewer than p // 2 = {half} usable fine classes"
        warnings.warn(f"{owner}: {message} and are skipped: {too_small[:10]}.", stacklevel=3)
    return [fine for _, fine in sorted(groups.items()) if len(fine) >= half]


def draw_classes(
    classes: list[Tensor], stream: Iterator[int], count: int, k: int, generator: torch.Generator
) -> list[int]:
    """``k`` images (:func:`draw_from_class`) of each of the next ``count`` classes of ``stream``."""
    return [i for c in itertools.islice(stream, count) for i in draw_from_class(classes[c], k, generator)]


def cycled_permutation(n: int, generator: torch.Generator) -> Iterator[int]:
    """A random permutation of ``range(n)``, repeated forever: classes are drawn evenly, in a per-epoch order."""
    return itertools.cycle(torch.randperm(n, generator=generator).tolist())
