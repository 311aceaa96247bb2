"""The public sampler base (``ranklit.data.EpochBatchSampler``): the example subclass of ``docs/extending.md`` runs as
written and gets the base class's epoch seeds, rank split and resumable position."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from ranklit.data import EpochBatchSampler

EXTENDING = Path(__file__).resolve().parents[2] / "docs" / "extending.md"


def _example() -> dict[str, Any]:
    """Run the code block of the sampler section of docs/extending.md; its names."""
    section = EXTENDING.read_text(encoding="utf-8").split("## A batch sampler", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert code is not None, "the sampler section of docs/extending.md lost its example"
    names: dict[str, Any] = {}
    exec(code.group(1), names)
    return names


def test_the_documented_subclass_plans_epochs_splits_ranks_and_resumes() -> None:
    example = _example()
    chunks = example["SortedChunksSampler"]
    assert issubclass(chunks, EpochBatchSampler)
    batches = example["batches"]
    assert sorted(b[0] for b in batches) == [0, 4, 8]
    assert all(b == list(range(b[0], b[0] + 4)) for b in batches)
    labels = torch.zeros(40, dtype=torch.long)
    epochs = []
    for epoch in range(3):
        sampler = chunks(labels, batch_size=4, seed=1)
        sampler.set_epoch(epoch)
        epochs.append(list(sampler))
    assert epochs[0] != epochs[1] != epochs[2]  # a new order each epoch, from seed + epoch
    ranks = [list(chunks(labels, batch_size=4, seed=1, rank=r, world_size=2)) for r in range(2)]
    assert sorted(map(tuple, ranks[0] + ranks[1])) == sorted(map(tuple, epochs[0]))  # ranks share out one plan
    sampler = chunks(labels, batch_size=4, seed=1)
    first = iter(sampler)
    head = [next(first) for _ in range(4)]
    resumed = chunks(labels, batch_size=4, seed=1)
    resumed.load_state_dict(sampler.state_dict())
    assert head + list(resumed) == epochs[0]
