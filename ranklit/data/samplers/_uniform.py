"""Batches drawn uniformly at random, without regard to classes (Revaud et al. §4.2, the listwise AP loss)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from ranklit._checks import check_positive_int
from ranklit.data.samplers.base import EpochBatchSampler, batches_per_rank, label_matrix

__all__ = ["UniformBatchSampler"]


class UniformBatchSampler(EpochBatchSampler):
    """Each epoch, a permutation of the whole dataset cut into batches of ``batch_size`` images.

    Revaud et al. train the listwise AP loss on batches of images "sampled at random" (§4.2) and report that batches
    restricted to fewer classes change little (Fig. 4); with thousands of images per batch, most images still find
    positives. Unlike :class:`ranklit.data.PKSampler` nothing guarantees a positive per query: the losses skip queries
    without one. The permutation is drawn with ``seed + epoch`` and the batches are dealt to the DDP ranks as in
    every ranklit sampler (resumable position included).

    Args:
        labels: ``[N]`` or ``[N, L]`` integer labels (only their number is used).
        batch_size: images per batch.
        seed, rank, world_size, drop_last: as in :class:`ranklit.data.PKSampler` (``drop_last`` drops the last,
            incomplete batch; otherwise it is completed with the first images of the permutation).

    Example:
        >>> sampler = UniformBatchSampler(torch.arange(10) // 2, batch_size=4, seed=0)
        >>> batches = list(sampler)
        >>> len(sampler), [len(b) for b in batches], sorted(set(i for b in batches for i in b)) == list(range(10))
        (3, [4, 4, 4], True)
    """

    PLAN_SETTINGS = ("batch_size", "drop_last")

    def __init__(
        self,
        labels: Tensor | Sequence[int],
        batch_size: int,
        *,
        seed: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        drop_last: bool = False,
    ) -> None:
        self.setup_batches(check_positive_int("batch_size", batch_size), 1, seed, rank, world_size, drop_last)
        self.num_items = label_matrix(labels, 1).shape[0]
        full = self.num_items / self.batch_size
        self._per_pass = math.floor(full) if self.drop_last else math.ceil(full)
        if self._per_pass < 1:
            raise ValueError(
                f"`batch_size`={self.batch_size} exceeds the {self.num_items} images with `drop_last=True`: lower it."
            )
        self.num_batches = batches_per_rank(self._per_pass, self.world_size, self.drop_last, "The images")

    def plan_epoch(self, generator: torch.Generator) -> list[list[int]]:
        order = torch.randperm(self.num_items, generator=generator)
        order = torch.cat([order, order[: self._per_pass * self.batch_size - self.num_items]])
        return [chunk.tolist() for chunk in order[: self._per_pass * self.batch_size].split(self.batch_size)]
