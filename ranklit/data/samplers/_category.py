"""FastAP's batches for a dataset where only some classes have a category (PKU VehicleID; FastAP supp. A)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ranklit.data.samplers._class_draws import (
    cycled_permutation,
    draw_classes,
    group_by_super_class,
    two_level_classes,
)
from ranklit.data.samplers._pk import SmallClasses
from ranklit.data.samplers.base import EpochBatchSampler, batches_per_rank, option

__all__ = ["CategorySampler"]


class CategorySampler(EpochBatchSampler):
    """Half of each batch from one labelled category, half from the uncategorised classes ([spec §3][spec-training]).

    FastAP's VehicleID batches (supp. A): only some vehicles carry a model label. A *category* is a super-class
    (column ``super_column``) holding at least two fine classes. A fine class alone in its super-class has *no
    category*: that is how :class:`ranklit.data.VehicleID` encodes a vehicle without a model label. A labelled model
    with a single vehicle in the training set is counted the same way.

    Each batch has ``p // 2`` fine classes × ``k`` images of one category, and ``p // 2`` fine classes × ``k`` images
    from the classes without a category. Each category ``c`` of ``N_c`` images gets ``round(2 N_c / (p k))`` batches
    per epoch (at least one), so an epoch has about ``sum_c 2 N_c / M`` batches, as in the paper. The batches come in
    an order shuffled by the ``seed + epoch`` generator. Fine classes are taken from per-epoch permutations,
    cyclically. Small fine classes are completed or skipped as in :class:`ranklit.data.PKSampler`. A category with
    fewer than ``p // 2`` usable fine classes is skipped, with a warning.

    Args:
        labels: ``[N, L]`` integer labels, ``L >= 2``, column 0 the finest.
        p: fine classes per batch (even).
        k: images per fine class.
        super_column: the label column holding the category (default 1).
        seed, rank, world_size, small_classes, drop_last: as in :class:`ranklit.data.PKSampler`.

    Raises:
        ValueError: odd ``p``, no category with ``p // 2`` usable fine classes, fewer than ``p // 2`` usable classes
            without a category, a fine class under two super-classes.

    Example:
        >>> fine = torch.arange(8).repeat_interleave(2)
        >>> category = torch.tensor([0, 0, 0, 0, 1, 2, 3, 4]).repeat_interleave(2)  # classes 4-7: no category
        >>> sampler = CategorySampler(torch.stack([fine, category], 1), p=2, k=2)
        >>> batches = list(sampler)  # 2 * 8 images of category 0 / batches of 4 = 4 batches
        >>> len(sampler), all(category[b[0]] == 0 and category[b[2]] > 0 for b in batches)
        (4, True)
    """

    PLAN_SETTINGS = (*EpochBatchSampler.PLAN_SETTINGS, "small_classes", "super_column")

    def __init__(
        self,
        labels: Tensor | Sequence[Sequence[int]],
        p: int,
        k: int,
        *,
        super_column: int = 1,
        seed: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        small_classes: SmallClasses = "replace",
        drop_last: bool = False,
    ) -> None:
        self.setup_batches(p, k, seed, rank, world_size, drop_last)
        self.small_classes, self.super_column = small_classes, super_column
        why_even = "p // 2 fine classes from a category, p // 2 without"
        members, supers, usable = two_level_classes(self, labels, super_column, small_classes, why_even)
        size = {s: supers.count(s) for s in set(supers)}
        half = self.p // 2
        self._without = [members[c] for c in usable if size[supers[c]] == 1]
        labelled = [c for c in usable if size[supers[c]] > 1]
        self._categories = group_by_super_class(members, supers, labelled, half, "CategorySampler", "categories")
        if not self._categories or len(self._without) < half:
            raise ValueError(
                f"CategorySampler needs a category with {half} usable fine classes (found "
                f"{len(self._categories)}) and {half} usable classes without a category (found {len(self._without)}); "
                f"lower {option('p')}, or use `PKSampler`/`HierarchicalSampler`."
            )
        self._batches_per_category = [
            max(1, round(2 * sum(len(m) for m in fine) / self.batch_size)) for fine in self._categories
        ]
        self.num_batches = batches_per_rank(
            sum(self._batches_per_category), self.world_size, self.drop_last, "The categories"
        )

    def plan_epoch(self, generator: torch.Generator) -> list[list[int]]:
        slots = [c for c, n in enumerate(self._batches_per_category) for _ in range(n)]
        streams = [cycled_permutation(len(fine), generator) for fine in self._categories]
        without = cycled_permutation(len(self._without), generator)
        half, plan = self.p // 2, []
        for slot in torch.randperm(len(slots), generator=generator).tolist():
            category = slots[slot]
            batch = draw_classes(self._categories[category], streams[category], half, self.k, generator)
            plan.append(batch + draw_classes(self._without, without, half, self.k, generator))
        return plan
