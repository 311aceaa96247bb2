"""``RetrievalDataModule``'s evaluation loaders: the whole set in order on one process, one share per rank under DDP."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ranklit.data import RetrievalDataModule
from tests.tiny import tiny_datamodule


def _datamodule() -> RetrievalDataModule:
    return tiny_datamodule({"images_per_class": 5}, p=2, size=16, eval_batch_size=6)


def _indices(loader: torch.utils.data.DataLoader) -> list[int]:
    return [int(i) for batch in loader for i in batch["index"]]


def test_single_process_evaluation_loader_is_the_whole_set_in_order() -> None:
    dm = _datamodule()
    dm.setup("validate")
    indices = _indices(dm.val_dataloader())
    assert indices == list(range(len(indices))) and len(indices) == 20  # the test half: 4 classes of 5 images


def _ddp_worker(rank: int, folder: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=rank, world_size=2)
    try:
        dm = _datamodule()
        dm.setup("validate")
        torch.save(_indices(dm.val_dataloader()), f"{folder}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_each_ddp_rank_embeds_its_own_share(tmp_path: Path) -> None:
    import torch.multiprocessing as mp

    mp.spawn(_ddp_worker, args=(str(tmp_path),), nprocs=2, join=True)
    shares = [torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1)]
    assert len(shares[0]) == len(shares[1]) == 10  # 20 test images over 2 ranks
    assert sorted(shares[0] + shares[1]) == list(range(20))  # disjoint, and together the whole set
