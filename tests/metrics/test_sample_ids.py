"""``latest_per_id`` (ranklit.functional.sample_ids) against a loop, and its old import path."""

from __future__ import annotations

import pytest
import torch

import ranklit.metrics.decomposability as decomposability
from ranklit.functional.sample_ids import latest_per_id


@pytest.mark.parametrize("seed", range(5))
def test_latest_per_id_matches_a_loop(seed: int) -> None:
    ids = torch.randint(0, 12, (30,), generator=torch.Generator().manual_seed(seed))
    last: dict[int, int] = {}
    for position, sample in enumerate(ids.tolist()):
        last[sample] = position  # a later copy overwrites an earlier one
    assert latest_per_id(ids).tolist() == [last[sample] for sample in sorted(last)]


def test_old_path_still_works_with_a_deprecation_warning() -> None:
    with pytest.warns(DeprecationWarning, match="ranklit.functional.sample_ids"):
        old = decomposability.latest_per_id
    assert old is latest_per_id
    with pytest.raises(AttributeError):
        _ = decomposability.no_such_name
