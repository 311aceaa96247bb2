"""``UniformBatchSampler``: permutation batches, seeded per epoch, split between ranks, resumable."""

from __future__ import annotations

import pytest
import torch

from ranklit.data.samplers._uniform import UniformBatchSampler

LABELS = torch.arange(22) // 3  # 22 images of 8 classes


def test_one_epoch_is_a_permutation_cut_into_batches_and_the_last_one_completed() -> None:
    batches = list(UniformBatchSampler(LABELS, batch_size=5, seed=3))
    assert [len(b) for b in batches] == [5] * 5
    seen = [i for b in batches for i in b]
    assert sorted(set(seen)) == list(range(22)) and len(seen) - len(set(seen)) == 3  # 25 slots for 22 images
    dropped = list(UniformBatchSampler(LABELS, batch_size=5, seed=3, drop_last=True))
    assert dropped == batches[:4]


def test_epochs_differ_and_repeat_with_the_seed() -> None:
    sampler = UniformBatchSampler(LABELS, batch_size=4, seed=1)
    first = list(sampler)
    sampler.set_epoch(1)
    assert list(sampler) != first
    sampler.set_epoch(0)
    assert list(sampler) == first == list(UniformBatchSampler(LABELS, batch_size=4, seed=1))


@pytest.mark.parametrize(("batch_size", "completed"), [(4, 0), (5, 1)])  # 6 batches, or 5 + one cycled
def test_ranks_share_one_plan(batch_size: int, completed: int) -> None:
    plan = list(UniformBatchSampler(LABELS, batch_size=batch_size, seed=2, world_size=1, rank=0))
    ranks = [list(UniformBatchSampler(LABELS, batch_size=batch_size, seed=2, world_size=2, rank=r)) for r in (0, 1)]
    assert ranks[0] == plan[0::2] and ranks[1] == plan[1::2] + plan[:completed]


def test_resumes_where_it_stopped() -> None:
    sampler = UniformBatchSampler(LABELS, batch_size=4, seed=0)
    batches = iter(sampler)
    next(batches), next(batches)
    resumed = UniformBatchSampler(LABELS, batch_size=4, seed=0)
    resumed.load_state_dict(sampler.state_dict())
    assert list(resumed) == list(batches)


def test_bad_batch_size_is_rejected() -> None:
    with pytest.raises(ValueError, match="`batch_size` must be a positive integer"):
        UniformBatchSampler(LABELS, batch_size=0)
    with pytest.raises(ValueError, match="exceeds the 22 images"):
        UniformBatchSampler(LABELS, batch_size=30, drop_last=True)
