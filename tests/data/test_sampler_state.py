"""Sampler positions: a sampler restored at any step yields exactly the batches the uninterrupted one yields next."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from ranklit.data import CategorySampler, HierarchicalSampler, PKSampler, UniformBatchSampler


def _hier(num_super: int = 3, per_super: int = 4, images: int = 3) -> torch.Tensor:
    fine = torch.arange(num_super * per_super).repeat_interleave(images)
    return torch.stack([fine, fine // per_super], dim=1)


def _category() -> torch.Tensor:
    fine = torch.arange(10).repeat_interleave(2)
    return torch.stack([fine, torch.tensor([0, 0, 0, 0, 1, 1, 1, 2, 3, 4]).repeat_interleave(2)], dim=1)


FACTORIES = {
    "pk": lambda **kw: PKSampler(_hier()[:, 0], 2, 2, seed=5, batches_per_epoch=7, **kw),
    "hierarchical": lambda **kw: HierarchicalSampler(_hier(), 2, 2, batches_per_super_pair=2, seed=5, **kw),
    "category": lambda **kw: CategorySampler(_category(), 2, 2, seed=5, **kw),
}
EPOCHS = 3


def _run(sampler, epochs: range) -> list[list[int]]:
    batches = []
    for epoch in epochs:
        sampler.set_epoch(epoch)
        batches += list(sampler)
    return batches


@pytest.mark.parametrize("kind", FACTORIES)
@pytest.mark.parametrize("rank", [0, 1])
def test_round_trip_at_every_step_with_two_ranks(kind: str, rank: int) -> None:
    def make():
        return FACTORIES[kind](rank=rank, world_size=2)

    expected = _run(make(), range(EPOCHS))
    per_epoch = len(make())
    for step in range(len(expected) + 1):
        original = make()
        stream = (b for e in range(EPOCHS) for b in (original.set_epoch(e), iter(original))[1])
        assert list(itertools.islice(stream, step)) == expected[:step]
        state = original.state_dict()
        resumed = make()
        resumed.load_state_dict(state)
        epoch = resumed.epoch
        rest = (list(resumed) if epoch < EPOCHS else []) + _run(resumed, range(epoch + 1, EPOCHS))
        assert rest == expected[step:], f"resumed after {step} batches ({per_epoch} per epoch)"


@pytest.mark.parametrize("kind", FACTORIES)
def test_lightning_order_iter_before_set_epoch(kind: str) -> None:
    """Lightning resuming at an epoch boundary: a fresh sampler, ``iter()``, then ``set_epoch``, then ``next()``."""
    expected = _run(FACTORIES[kind](rank=0, world_size=1), range(2))
    per_epoch = len(expected) // 2
    fresh = FACTORIES[kind](rank=0, world_size=1)
    loader = DataLoader(TensorDataset(torch.arange(100)), batch_sampler=fresh)
    iterator = iter(loader)
    fresh.set_epoch(1)
    assert [b[0].tolist() for b in iterator] == expected[per_epoch:]
    restored = FACTORIES[kind](rank=0, world_size=1)
    restored.load_state_dict({**fresh.state_dict(), "epoch": 0, "batches": per_epoch})  # end of epoch 0
    assert restored.epoch == 1 and list(restored) == expected[per_epoch:]


def test_trained_count_overrides_the_prefetched_position() -> None:
    sampler = FACTORIES["pk"](rank=0, world_size=1)
    expected = list(sampler)
    iterator = iter(sampler)
    for _ in range(5):  # e.g. two batches trained, three prefetched by workers
        next(iterator)
    resumed = FACTORIES["pk"](rank=0, world_size=1)
    resumed.load_state_dict(sampler.state_dict() | {"batches": 2})
    assert list(resumed) == expected[2:]
    assert list(resumed) == expected  # the position applies once: a further pass is the whole epoch


def test_set_epoch_keeps_the_position_of_its_epoch_only() -> None:
    sampler = FACTORIES["pk"](rank=0, world_size=1)
    sampler.set_epoch(2)
    expected = list(sampler)
    sampler.load_state_dict(sampler.state_dict() | {"batches": 3})
    sampler.set_epoch(2)  # what Lightning does after a resumption
    assert list(sampler) == expected[3:]
    sampler.load_state_dict(sampler.state_dict() | {"epoch": 1, "batches": 3})
    sampler.set_epoch(2)  # another epoch: from its first batch
    assert list(sampler) == expected


@pytest.mark.parametrize(
    ("change", "match"),
    [({"seed": 6}, "checkpoint 6, this one 5"), ({"world_size": 2}, "checkpoint 2, this one 1"),
     ({"num_batches": 3}, "checkpoint 3, this one 7"),
     ({"batches": -1}, "negative"), ({"epoch": None}, "lacks")],
)
def test_mismatched_state_is_rejected(change: dict, match: str) -> None:
    sampler = FACTORIES["pk"](rank=0, world_size=1)
    state = {k: v for k, v in (sampler.state_dict() | change).items() if v is not None}
    with pytest.raises(ValueError, match=match):
        sampler.load_state_dict(state)


def test_the_number_of_processes_may_change_at_the_end_of_an_epoch_only() -> None:
    two = [FACTORIES["pk"](rank=r, world_size=2) for r in (0, 1)]
    for sampler in two:
        list(sampler)  # epoch 0 finished on both ranks
    one = FACTORIES["pk"](rank=0, world_size=1)
    one.load_state_dict(two[0].state_dict())
    reference = FACTORIES["pk"](rank=0, world_size=1)
    reference.set_epoch(1)
    assert list(one) == list(reference)  # epoch 1, dealt to the single process
    middle = FACTORIES["pk"](rank=0, world_size=2)
    next(iter(middle))
    with pytest.raises(ValueError, match=r"batch 1 of epoch 0.*trainer.devices.*checkpoint 2, this one 1"):
        FACTORIES["pk"](rank=0, world_size=1).load_state_dict(middle.state_dict())



CHANGED_SETTINGS = {  # issue 47: each sampler setting that changes which items the rest of an epoch draws
    "pk-k": (FACTORIES["pk"], lambda **kw: PKSampler(_hier()[:, 0], 2, 3, seed=5, batches_per_epoch=7, **kw), "k"),
    "pk-p": (FACTORIES["pk"], lambda **kw: PKSampler(_hier()[:, 0], 3, 2, seed=5, batches_per_epoch=7, **kw), "p"),
    "pk-small": (FACTORIES["pk"], lambda **kw: PKSampler(_hier()[:, 0], 2, 2, seed=5, batches_per_epoch=7,
                                                          small_classes="skip", **kw), "small_classes"),
    "hierarchical-k": (FACTORIES["hierarchical"],
                       lambda **kw: HierarchicalSampler(_hier(), 2, 3, batches_per_super_pair=2, seed=5, **kw), "k"),
    "category-drop": (FACTORIES["category"], lambda **kw: CategorySampler(_category(), 2, 2, seed=5, drop_last=True,
                                                                          **kw), "drop_last"),
    "uniform-size": (lambda **kw: UniformBatchSampler(torch.arange(30), 4, seed=5, **kw),
                     lambda **kw: UniformBatchSampler(torch.arange(30), 3, seed=5, drop_last=False, **kw),
                     "batch_size"),
}


@pytest.mark.parametrize("case", CHANGED_SETTINGS)
def test_a_changed_setting_is_refused_inside_an_epoch_and_taken_at_its_end(case: str) -> None:
    """Another ``k`` (or ``p``…) with as many batches per epoch used to be resumed silently, drawing other images for
    the rest of the epoch; it is refused with the setting, both values and the ways on. At the end of an epoch the
    next one is planned afresh: the new setting is taken."""
    old, new, key = CHANGED_SETTINGS[case]
    interrupted = old(rank=0, world_size=1)
    next(iter(interrupted))
    with pytest.raises(ValueError, match=rf"batch 1 of epoch 0.*`{key}` \(CLI: `--data.batch_sampler.init_args."
                                         rf"{key}`\): checkpoint .*, this one .*--trainer.max_epochs 1"):
        new(rank=0, world_size=1).load_state_dict(interrupted.state_dict())
    finished = old(rank=0, world_size=1)
    list(finished)
    resumed, reference = new(rank=0, world_size=1), new(rank=0, world_size=1)
    resumed.load_state_dict(finished.state_dict())
    reference.set_epoch(1)
    assert resumed.epoch == 1 and list(resumed) == list(reference)
