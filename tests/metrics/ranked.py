"""Rank the relevant items of full score rows (the tests' way into `rank_relevant_items`)."""

from __future__ import annotations

import torch

from ranklit.functional.metrics._hierarchical import RelevantRanking, rank_relevant_items
from ranklit.functional.ranking import select_columns


def ranked_relevant(scores: torch.Tensor, levels: torch.Tensor, num_levels: int) -> RelevantRanking:
    """``scores`` and ``levels`` are ``[C, N]``; the relevant items are those of level >= 1 not removed (-inf)."""
    index, valid = select_columns((levels >= 1) & torch.isfinite(scores))
    return rank_relevant_items(scores, index, valid, levels.gather(1, index), num_levels)
