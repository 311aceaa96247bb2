"""P×K and hierarchical ("hard") batch samplers, seeded per epoch and aware of the DDP rank ([spec §3][spec-training]).

Both samplers are ``torch.utils.data.Sampler[list[int]]`` objects passed to a ``DataLoader`` as ``batch_sampler=``.
Each epoch, every rank rebuilds the same plan of batches from a generator seeded with ``seed + epoch`` and keeps the
batches ``rank, rank + world_size, ...`` of it: ranks draw distinct batches of one permutation, all ranks run the same
number of steps, and no global random state is touched. Lightning's fit loop sets the epoch (through
``batch_sampler.sampler.set_epoch``, where it looks); elsewhere call ``set_epoch`` before each epoch, or every epoch
repeats the batches of epoch 0. Lightning's own distributed sampler must be switched off
(``trainer.use_distributed_sampler: false``); if it is left on, constructing the sampler anew fails with a message
that says so.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor

from ranklit._checks import check_positive_int
from ranklit.data.samplers._class_draws import (
    class_members,
    cycled_permutation,
    draw_classes,
    draw_from_class,
    eligible_classes,
    epoch_length,
    group_by_super_class,
    two_level_classes,
)
from ranklit.data.samplers.base import EpochBatchSampler, batches_per_rank, label_matrix, option

__all__ = ["EpochLength", "PKSampler", "HierarchicalSampler", "SmallClasses"]

SmallClasses = Literal["replace", "skip"]
EpochLength = Literal["images", "classes"]


class PKSampler(EpochBatchSampler):
    """Batches of ``p`` classes × ``k`` images, every class about once per epoch ([spec §3][spec-training]).

    Each epoch, the eligible classes are permuted with a generator seeded by ``seed + epoch``; consecutive groups of
    ``p`` classes form the batches (the last group is completed with the first classes of the permutation unless
    ``drop_last``), and each class contributes ``k`` of its images drawn without replacement. An epoch is
    ``batches_per_epoch`` batches made of as many such passes (fresh permutations) as needed; by default about one
    pass over the images, ``ceil(N / (p k))`` batches for the ``N`` images of the usable classes, so a dataset of few
    classes and many images still trains ``N / (p k)`` steps per epoch (``"classes"``: one pass over the classes,
    ``ceil(C / p)`` batches, the epoch of the P×K papers).
    Classes with fewer than ``k`` images are either completed with repeats (``small_classes="replace"``: all their
    images, then draws with replacement) or skipped (``"skip"``); either way a warning counts them. The batches are
    dealt round-robin to the DDP ranks, so every rank gets ``len(sampler)`` distinct batches of the same plan.

    Args:
        labels: ``[N]`` or ``[N, L]`` integer labels (column 0, the finest, is used), e.g. ``dataset.labels``.
        p: classes per batch.
        k: images per class.
        seed: base seed; epoch ``e`` uses ``seed + e``.
        rank: this process's rank; defaults to the running process group's, else 0.
        world_size: number of processes; defaults to the running process group's, else 1.
        small_classes: ``"replace"`` or ``"skip"`` for classes with fewer than ``k`` images.
        drop_last: drop the incomplete last group of classes (and round the batch count down to a multiple of
            ``world_size``) instead of completing it (rounding up).
        batches_per_epoch: batches per epoch over all ranks: a number, ``"images"`` (default: about one pass over the
            images, ``ceil(N / (p k))``) or ``"classes"`` (one pass over the classes, ``ceil(C / p)``).

    With fewer eligible classes than ``p`` (a small dataset), every batch takes all of them and a warning says so.

    Raises:
        ValueError: no eligible class, or non-positive ``p``/``k``.

    Time and memory: O(N) to build, O(N + C) per epoch (one ``randperm`` per drawn class).

    Example:
        >>> labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
        >>> sampler = PKSampler(labels, p=2, k=2, seed=0)
        >>> len(sampler), [len(batch) for batch in sampler]
        (2, [4, 4])
        >>> sorted(i for batch in sampler for i in batch)
        [0, 1, 2, 3, 4, 5, 6, 7]
        >>> many = torch.arange(40) // 20  # 2 classes of 20 images: 10 batches of 2 x 2 per epoch, 1 per class pass
        >>> len(PKSampler(many, p=2, k=2)), len(PKSampler(many, p=2, k=2, batches_per_epoch="classes"))
        (10, 1)
    """

    PLAN_SETTINGS = (*EpochBatchSampler.PLAN_SETTINGS, "small_classes")

    def __init__(
        self,
        labels: Tensor | Sequence[int],
        p: int,
        k: int,
        *,
        seed: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        small_classes: SmallClasses = "replace",
        drop_last: bool = False,
        batches_per_epoch: int | EpochLength = "images",
    ) -> None:
        self.setup_batches(p, k, seed, rank, world_size, drop_last)
        members = class_members(label_matrix(labels, 1)[:, 0])
        eligible = eligible_classes(members, self.k, small_classes, "PKSampler")
        if not eligible:
            raise ValueError(
                f"PKSampler: no class has k={self.k} images; lower {option('k')} or use `small_classes='replace'`."
            )
        if len(eligible) < self.p:
            warnings.warn(
                f"PKSampler: {len(eligible)} classes with usable images, fewer than p={self.p}: every batch takes all "
                f"{len(eligible)} classes ({len(eligible)} x k={self.k} images). Lower {option('p')} to silence this "
                "warning.",
                stacklevel=2,
            )
            self.p, self.batch_size = len(eligible), len(eligible) * self.k
        self.small_classes = small_classes
        self._members = [members[c] for c in eligible]
        self.num_classes = len(eligible)
        passes = self.num_classes / self.p
        self._per_pass = math.floor(passes) if self.drop_last else math.ceil(passes)
        images = sum(len(m) for m in self._members)
        planned = epoch_length(batches_per_epoch, {"images": images / self.batch_size, "classes": passes})
        self.num_batches = batches_per_rank(planned, self.world_size, self.drop_last, "The classes")

    def plan_epoch(self, generator: torch.Generator) -> list[list[int]]:
        plan: list[list[int]] = []
        while (needed := self.num_batches * self.world_size - len(plan)) > 0:
            order = torch.randperm(self.num_classes, generator=generator).tolist()
            sequence = list(itertools.islice(itertools.cycle(order), min(self._per_pass, needed) * self.p))
            plan += [
                [i for c in sequence[b : b + self.p] for i in draw_from_class(self._members[c], self.k, generator)]
                for b in range(0, len(sequence), self.p)
            ]
        return plan


class HierarchicalSampler(EpochBatchSampler):
    """FastAP's "hard" batches: two super-classes per batch, half of the batch from each ([spec §3][spec-training]).

    Each half holds ``p // 2`` fine classes × ``k`` images of one super-class, so a batch has ``p × k`` items and
    its negatives are mostly of the same super-class (FastAP §4.2, supp. A; HAPPIER and ROADMAP on SOP). An epoch
    visits every unordered pair of eligible super-classes ``batches_per_super_pair`` times (the papers' epochs), in an
    order shuffled by the ``seed + epoch`` generator; by default (``None``) it is about one pass over the images,
    ``ceil(N / (p k))`` batches from a shuffled list of every pair repeated as often as needed. Within a super-class
    the fine classes are consumed from a per-epoch permutation, cyclically, so they are spread evenly. A fine class
    can be dropped or completed as in :class:`PKSampler`; a
    super-class with fewer than ``p // 2`` eligible fine classes is skipped (with a warning).

    Args:
        labels: ``[N, L]`` integer labels, ``L >= 2``, column 0 the finest.
        p: fine classes per batch (even; ``p // 2`` per half).
        k: images per fine class.
        batches_per_super_pair: batches per pair of super-classes per epoch (FastAP: 5 on SOP, 2 on In-Shop);
            ``None``: epochs of about one pass over the images.
        super_column: the label column holding the super-class (default 1, the level above the finest).
        seed, rank, world_size, small_classes, drop_last: as in :class:`PKSampler` (``drop_last`` rounds the number
            of batches down to a multiple of ``world_size`` instead of up).

    Raises:
        ValueError: odd ``p``, fewer than two eligible super-classes, a fine class under two super-classes.

    Time and memory: O(N) to build, O(N + S² · batches_per_super_pair · p) per epoch for S super-classes.

    Example:
        >>> fine = torch.arange(8).repeat_interleave(2)
        >>> labels = torch.stack([fine, fine // 4], dim=1)  # 8 classes of 2 images, 2 super-classes
        >>> sampler = HierarchicalSampler(labels, p=4, k=2, batches_per_super_pair=3)
        >>> batches = list(sampler)
        >>> len(sampler), [sorted(set(labels[b, 1].tolist())) for b in batches]
        (3, [[0, 1], [0, 1], [0, 1]])
        >>> len(HierarchicalSampler(labels, p=4, k=2))  # 16 images, batches of 8
        2
    """

    PLAN_SETTINGS = (*EpochBatchSampler.PLAN_SETTINGS, "small_classes", "super_column", "batches_per_super_pair")

    def __init__(
        self,
        labels: Tensor | Sequence[Sequence[int]],
        p: int,
        k: int,
        *,
        batches_per_super_pair: int | None = None,
        super_column: int = 1,
        seed: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        small_classes: SmallClasses = "replace",
        drop_last: bool = False,
    ) -> None:
        self.setup_batches(p, k, seed, rank, world_size, drop_last)
        self.small_classes, self.super_column = small_classes, super_column
        members, supers_of_class, usable = two_level_classes(
            self, labels, super_column, small_classes, "p // 2 fine classes from each of two super-classes"
        )
        per_pair = batches_per_super_pair
        self.batches_per_super_pair = (
            None if per_pair is None else check_positive_int("batches_per_super_pair", per_pair)
        )
        half = self.p // 2
        owner = "HierarchicalSampler"
        self._supers = group_by_super_class(members, supers_of_class, usable, half, owner, "super-classes")
        if len(self._supers) < 2:
            found = f"{half} usable fine classes, found {len(self._supers)}; lower {option('p')} or use `PKSampler`"
            raise ValueError(f"HierarchicalSampler needs at least 2 super-classes with {found}.")
        self.num_super_classes, self.num_classes = len(self._supers), sum(len(fine) for fine in self._supers)
        self._pairs = list(itertools.combinations(range(self.num_super_classes), 2))
        if self.batches_per_super_pair is None:
            num_planned = sum(len(m) for fine in self._supers for m in fine) / self.batch_size
        else:
            num_planned = len(self._pairs) * self.batches_per_super_pair
        self.num_batches = batches_per_rank(num_planned, self.world_size, self.drop_last, "The super-class pairs")

    def plan_epoch(self, generator: torch.Generator) -> list[list[int]]:
        rounds = self.batches_per_super_pair or math.ceil(self.num_batches * self.world_size / len(self._pairs))
        pairs = self._pairs * rounds
        streams = [cycled_permutation(len(fine), generator) for fine in self._supers]
        half, plan = self.p // 2, []
        for pair in torch.randperm(len(pairs), generator=generator).tolist():
            halves = [draw_classes(self._supers[s], streams[s], half, self.k, generator) for s in pairs[pair]]
            plan.append(halves[0] + halves[1])
        return plan
