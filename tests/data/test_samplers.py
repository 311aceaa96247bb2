"""PKSampler and HierarchicalSampler: batch shapes, seeding, coverage, rank split, and the Lightning guard."""

from __future__ import annotations

import math
import warnings
from collections import Counter
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from ranklit.data.samplers._pk import HierarchicalSampler, PKSampler


def _labels(sizes: list[int]) -> torch.Tensor:
    """Flat labels where class c has sizes[c] items, shuffled so indices are not sorted by class."""
    labels = torch.arange(len(sizes)).repeat_interleave(torch.tensor(sizes))
    return labels[torch.randperm(len(labels), generator=torch.Generator().manual_seed(1))]


def _hier_labels(num_super: int, classes_per_super: int, images: int) -> torch.Tensor:
    fine = torch.arange(num_super * classes_per_super).repeat_interleave(images)
    return torch.stack([fine, fine // classes_per_super], dim=1)


def _check_pk(batch: list[int], labels: torch.Tensor, p: int, k: int) -> None:
    assert len(batch) == p * k
    counts = Counter(labels[batch].tolist())
    assert len(counts) == p and set(counts.values()) == {k}


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("num_classes", [12, 13, 17])
def test_pk_batches_shape_and_coverage(num_classes: int, drop_last: bool) -> None:
    labels = _labels([5 + c % 4 for c in range(num_classes)])
    sampler = PKSampler(labels, p=4, k=3, seed=3, drop_last=drop_last, batches_per_epoch="classes")
    batches = list(sampler)
    assert len(batches) == len(sampler) == (num_classes // 4 if drop_last else -(-num_classes // 4))
    for batch in batches:
        _check_pk(batch, labels, 4, 3)
        assert len(set(batch)) == len(batch)  # without replacement when the class is large enough
    seen = {int(labels[i]) for batch in batches for i in batch}
    if drop_last:
        assert len(seen) == 4 * len(batches)
    else:
        assert seen == set(range(num_classes))  # one epoch covers every eligible class


@pytest.mark.parametrize(("world_size", "drop_last", "per_rank"), [(1, False, 10), (3, False, 4), (3, True, 3)])
def test_pk_batches_per_epoch_makes_fresh_passes(world_size: int, drop_last: bool, per_rank: int) -> None:
    labels = _labels([5] * 12)
    samplers = [
        PKSampler(labels, 4, 2, rank=r, world_size=world_size, drop_last=drop_last, batches_per_epoch=10)
        for r in range(world_size)
    ]
    assert [len(s) for s in samplers] == [per_rank] * world_size
    per = [list(s) for s in samplers]
    plan = [per[i % world_size][i // world_size] for i in range(per_rank * world_size)]  # undo the round-robin
    for batch in plan:
        _check_pk(batch, labels, 4, 2)
    for start in range(0, len(plan) - 2, 3):  # 3 batches = one pass over the 12 classes
        assert {int(labels[i]) for b in plan[start : start + 3] for i in b} == set(range(12))
    assert plan[:3] != plan[3:6]  # each pass is a fresh permutation and fresh draws
    with pytest.raises(ValueError, match="`batches_per_epoch` must be a positive integer"):
        PKSampler(labels, 4, 2, batches_per_epoch=0)


def test_pk_seed_and_epoch() -> None:
    labels = _labels([4] * 10)
    a, b = PKSampler(labels, 2, 2, seed=5), PKSampler(labels, 2, 2, seed=5)
    assert list(a) == list(b) and list(a) == list(a)
    a.set_epoch(1)
    assert list(a) != list(b)
    b.set_epoch(1)
    assert list(a) == list(b)
    assert list(PKSampler(labels, 2, 2, seed=6)) != list(PKSampler(labels, 2, 2, seed=5))


@pytest.mark.parametrize("world_size", [2, 3])
def test_pk_ranks_distinct_same_length(world_size: int) -> None:
    labels = _labels([3] * 23)
    samplers = [PKSampler(labels, 3, 3, seed=0, rank=r, world_size=world_size) for r in range(world_size)]
    for s in samplers:
        s.set_epoch(4)
    per_rank = [list(s) for s in samplers]
    assert len({len(s) for s in samplers}) == 1 and all(len(b) == len(samplers[0]) for b in per_rank)
    assert len(samplers[0]) == math.ceil(math.ceil(23 / 3) / world_size)
    flat = [tuple(sorted(b)) for batches in per_rank for b in batches]
    assert len(set(flat)) == len(flat)  # no batch is drawn by two ranks
    union = {int(labels[i]) for batches in per_rank for b in batches for i in b}
    assert union == set(range(23))


def test_pk_small_classes_replace_and_skip() -> None:
    labels = _labels([1, 2, 5, 5, 5, 5])
    with pytest.warns(UserWarning, match="2 of 6 classes have fewer than k=4 images; they are completed"):
        sampler = PKSampler(labels, 2, 4, small_classes="replace")
    batches = list(sampler)
    for batch in batches:
        _check_pk(batch, labels, 2, 4)
    members_of_1 = (labels == 1).nonzero().flatten().tolist()
    drawn = [i for b in batches for i in b if labels[i] == 1]
    assert set(drawn) == set(members_of_1)  # every image of a small class is used, the rest are repeats
    with pytest.warns(UserWarning, match="2 of 6 classes .* skipped"):
        skipped = PKSampler(labels, 2, 4, small_classes="skip")
    assert skipped.num_classes == 4
    assert all(int(labels[i]) >= 2 for b in skipped for i in b)


def test_pk_accepts_matrix_labels_and_no_warning_when_large() -> None:
    fine = _labels([4] * 6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sampler = PKSampler(torch.stack([fine, fine // 2], dim=1), 3, 2)
    for batch in sampler:
        _check_pk(batch, fine, 3, 2)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"p": 2, "k": 5, "small_classes": "skip"}, "no class has k=5 images"),
        ({"p": 0, "k": 2}, "`p` must be a positive integer"),
        ({"p": 2, "k": 2, "small_classes": "drop"}, "`small_classes` must be"),
        ({"p": 2, "k": 2, "rank": 2, "world_size": 2}, "`rank` must be an integer in"),
        ({"p": 3, "k": 2, "world_size": 4, "rank": 0, "drop_last": True, "batches_per_epoch": "classes"},
         "fewer than world_size=4"),
        ({"p": 3, "k": 2, "batches_per_epoch": "image"}, "positive integer or 'images' or 'classes', got 'image'"),
    ],
)
def test_pk_errors(kwargs: dict, match: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the small-class warning of the `skip` case
        with pytest.raises(ValueError, match=match):
            PKSampler(_labels([4] * 6), **kwargs)
    with pytest.raises(TypeError, match="must hold integers"):
        PKSampler(torch.rand(10), 2, 2)


def test_guard_against_lightning_distributed_sampler() -> None:
    labels = _labels([4] * 6)
    dataset = TensorDataset(torch.arange(len(labels)))
    injected = DistributedSampler(dataset, num_replicas=2, rank=0)
    with pytest.raises(TypeError, match="use_distributed_sampler: false"):
        PKSampler(injected, batch_size=8, drop_last=False)
    # the path Lightning takes when `use_distributed_sampler` is on under DDP
    from lightning.fabric.utilities.data import _dataloader_init_kwargs_resolve_sampler

    loader = DataLoader(dataset, batch_sampler=PKSampler(labels, 2, 4))
    with pytest.raises(TypeError, match="use_distributed_sampler: false"):
        _dataloader_init_kwargs_resolve_sampler(loader, injected)


def test_lightning_sets_the_epoch() -> None:
    # Lightning's fit loop calls `set_epoch` on `dataloader.batch_sampler.sampler` (not on the batch sampler)
    from lightning.fabric.utilities.data import _set_sampler_epoch

    labels = _hier_labels(2, 4, 2)
    for sampler in (PKSampler(labels, 2, 2), HierarchicalSampler(labels, 2, 2)):
        loader = DataLoader(TensorDataset(torch.arange(len(labels))), batch_sampler=sampler)
        _set_sampler_epoch(loader, 3)
        assert sampler.epoch == 3


def test_trainer_draws_new_batches_each_epoch(tmp_path: Path) -> None:
    import lightning as L

    seen: list[list[int]] = []

    class Recorder(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(1))

        def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
            seen.append(batch[0].tolist())
            return self.weight.sum() * 0

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    labels = _labels([2] * 6)
    sampler = PKSampler(labels, 3, 2, seed=4)
    loader = DataLoader(TensorDataset(torch.arange(len(labels))), batch_sampler=sampler)
    options = {"logger": False, "enable_checkpointing": False, "enable_progress_bar": False}
    options |= {"enable_model_summary": False, "default_root_dir": tmp_path}
    trainer = L.Trainer(max_epochs=2, accelerator="cpu", **options)
    trainer.fit(Recorder(), loader)
    expected = []
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        expected += list(sampler)
    assert seen == expected and seen[:2] != seen[2:]


def test_dataloader_integration() -> None:
    labels = _labels([4] * 6)
    sampler = PKSampler(labels, 3, 2)
    loader = DataLoader(TensorDataset(torch.arange(len(labels)), labels), batch_sampler=sampler)
    assert len(loader) == 4  # one pass over the 24 images in batches of 6
    for index, label in loader:
        assert index.shape == (6,) and torch.equal(label, labels[index])


def test_hierarchical_half_and_half() -> None:
    labels = _hier_labels(num_super=4, classes_per_super=6, images=3)
    sampler = HierarchicalSampler(labels, p=4, k=3, batches_per_super_pair=3, seed=1)
    batches = list(sampler)
    assert len(batches) == len(sampler) == 6 * 3
    pair_counts: Counter = Counter()
    for batch in batches:
        _check_pk(batch, labels[:, 0], 4, 3)
        halves = Counter(labels[batch, 1].tolist())
        assert len(halves) == 2 and set(halves.values()) == {6}
        pair_counts[tuple(sorted(halves))] += 1
    assert set(pair_counts.values()) == {3} and len(pair_counts) == 6  # each pair batches_per_super_pair times
    # each super-class is in 3 pairs × 3 batches × 2 classes = 18 draws ≥ its 6 classes: all classes covered
    assert {int(labels[i, 0]) for b in batches for i in b} == set(range(24))


def test_hierarchical_seed_ranks_and_guard() -> None:
    labels = _hier_labels(3, 4, 2)
    one = list(HierarchicalSampler(labels, 2, 2, batches_per_super_pair=5, seed=2))
    assert one == list(HierarchicalSampler(labels, 2, 2, batches_per_super_pair=5, seed=2))
    ranks = [HierarchicalSampler(labels, 2, 2, batches_per_super_pair=5, rank=r, world_size=2) for r in (0, 1)]
    assert len(ranks[0]) == len(ranks[1]) == 8  # 15 planned batches, rounded up for 2 ranks
    # the ranks deal out the slots of the single-process plan (cycled to 16 batches): distinct draws, same plan
    plan = list(HierarchicalSampler(labels, 2, 2, batches_per_super_pair=5, rank=0, world_size=1))
    assert list(ranks[0]) == plan[0::2] and list(ranks[1]) == plan[1::2] + plan[:1]
    with pytest.raises(TypeError, match="use_distributed_sampler: false"):
        HierarchicalSampler(DistributedSampler(TensorDataset(labels), num_replicas=2, rank=0), 4, 2)


def test_hierarchical_errors_and_skipped_supers() -> None:
    labels = _hier_labels(3, 4, 2)
    with pytest.raises(ValueError, match="`p` must be even"):
        HierarchicalSampler(labels, 3, 2)
    with pytest.raises(ValueError, match=r"\[N, L\] with L >= 2"):
        HierarchicalSampler(labels[:, 0], 2, 2)
    with pytest.raises(ValueError, match="`super_column`"):
        HierarchicalSampler(labels, 2, 2, super_column=0)
    broken = labels.clone()
    broken[0, 1] = 2
    with pytest.raises(ValueError, match="not a hierarchy"):
        HierarchicalSampler(broken, 2, 2)
    uneven = torch.cat([labels, torch.tensor([[100, 9], [100, 9]])])
    with pytest.warns(UserWarning, match="1 super-classes have fewer than p // 2 = 2"):
        sampler = HierarchicalSampler(uneven, 4, 2)
    assert sampler.num_super_classes == 3
    with pytest.raises(ValueError, match="at least 2 super-classes"), pytest.warns(UserWarning, match="fewer than"):
        HierarchicalSampler(uneven, 10, 2)


def _ddp_worker(rank: int, folder: str, labels: torch.Tensor) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=rank, world_size=2)
    try:
        sampler = PKSampler(labels, 3, 2, seed=7)  # rank and world size from the process group
        sampler.set_epoch(2)
        batches = [[int(i) for i in batch] for batch in sampler]
        torch.save({"len": len(sampler), "batches": batches}, f"{folder}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_pk_real_two_process_gloo(tmp_path: Path) -> None:
    import torch.multiprocessing as mp

    labels = _labels([2] * 14)
    mp.spawn(_ddp_worker, args=(str(tmp_path), labels), nprocs=2, join=True)
    results = [torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1)]
    assert results[0]["len"] == results[1]["len"] == 3  # ceil(ceil(14 / 3) / 2)
    for rank, result in enumerate(results):
        expected = PKSampler(labels, 3, 2, seed=7, rank=rank, world_size=2)
        expected.set_epoch(2)
        assert result["batches"] == list(expected)
    flat = [tuple(sorted(b)) for result in results for b in result["batches"]]
    assert len(set(flat)) == len(flat)
    assert {int(labels[i]) for b in flat for i in b} == set(range(14))


def test_fewer_classes_than_p_takes_every_class_with_a_warning() -> None:
    labels = _labels([4] * 6)  # 6 classes
    expected = r"6 classes with usable images, fewer than p=8.*--data.batch_sampler.init_args.p"
    with pytest.warns(UserWarning, match=expected):
        sampler = PKSampler(labels, 8, 2)
    batches = list(sampler)
    assert sampler.p == 6 and sampler.batch_size == 12 and len(batches) == 2  # 24 images
    assert sorted(set(labels[batches[0]].tolist())) == list(range(6))  # every class, k = 2 images each
    assert sorted(labels[batches[0]].tolist()) == sorted(list(range(6)) * 2)


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_default_epoch_is_about_one_pass_over_the_images(world_size: int) -> None:
    """5 classes of 40 images, batches of 4 x 4: 13 batches per epoch over the ranks (not 2, the pass over the
    classes), which reach most of the images."""
    labels = _labels([40] * 5)
    samplers = [PKSampler(labels, 4, 4, rank=r, world_size=world_size) for r in range(world_size)]
    batches = [b for sampler in samplers for b in sampler]
    assert len(batches) == sum(len(s) for s in samplers) == world_size * -(-13 // world_size)
    assert len({i for b in batches for i in b}) > 0.6 * len(labels)  # draws without replacement within a batch
    assert len(PKSampler(labels, 4, 4, batches_per_epoch="classes")) == 2


def test_hierarchical_default_epoch_is_about_one_pass_over_the_images() -> None:
    labels = _hier_labels(num_super=3, classes_per_super=6, images=5)  # 90 images, batches of 4 x 3
    sampler = HierarchicalSampler(labels, p=4, k=3, seed=2)
    batches = list(sampler)
    assert len(batches) == len(sampler) == 8  # ceil(90 / 12), over the 3 pairs of super-classes
    assert len(Counter(tuple(sorted(set(labels[b, 1].tolist()))) for b in batches)) == 3
