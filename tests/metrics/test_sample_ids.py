"""``latest_per_id`` (ranklit.functional.sample_ids) against a loop."""

from __future__ import annotations

import pytest
import torch

from ranklit.functional.sample_ids import latest_per_id


@pytest.mark.parametrize("seed", range(5))
def test_latest_per_id_matches_a_loop(seed: int) -> None:
    ids = torch.randint(0, 12, (30,), generator=torch.Generator().manual_seed(seed))
    last: dict[int, int] = {}
    for position, sample in enumerate(ids.tolist()):
        last[sample] = position  # a later copy overwrites an earlier one
    assert latest_per_id(ids).tolist() == [last[sample] for sample in sorted(last)]

