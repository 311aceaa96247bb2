"""mAP of Revisited Oxford and Paris under the easy / medium / hard protocols (Radenović et al., CVPR 2018).

Each query comes with three lists of gallery indices: ``easy`` and ``hard`` positives and ``junk``. The protocols
(as defined by the revisitop evaluation) are::

    easy:    positives = easy          removed = junk + hard
    medium:  positives = easy + hard   removed = junk
    hard:    positives = hard          removed = junk + easy

Removed items are taken out of the query's ranking before computing AP; queries without a positive in a protocol
are left out of that protocol's mean.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from ranklit.functional.inputs import prepare_inputs
from ranklit.functional.metrics import metrics_chunk_size
from ranklit.functional.positive_ranks import positive_ranks
from ranklit.functional.ranking import select_columns

__all__ = ["revisited_map"]

_PROTOCOLS = {  # name: (lists of positives, lists removed from the ranking)
    "easy": (("easy",), ("junk", "hard")),
    "medium": (("easy", "hard"), ("junk",)),
    "hard": (("hard",), ("junk", "easy")),
}


def _index_masks(gnd: Sequence[Mapping[str, Sequence[int]]], num_refs: int, device: torch.device) -> dict[str, Tensor]:
    masks = {key: torch.zeros(len(gnd), num_refs, dtype=torch.bool, device=device) for key in ("easy", "hard", "junk")}
    for q, entry in enumerate(gnd):
        for key, mask in masks.items():
            if key not in entry:
                raise ValueError(
                    f"`gnd[{q}]` has no {key!r} list; each entry needs 'easy', 'hard' and 'junk' index lists."
                )
            index = torch.as_tensor(list(entry[key]), dtype=torch.long, device=device)
            if index.numel() and (int(index.min()) < 0 or int(index.max()) >= num_refs):
                raise ValueError(
                    f"`gnd[{q}][{key!r}]` holds gallery indices outside [0, {num_refs}): the lists must index the rows "
                    "of `ref_embeddings`."
                )
            mask[q, index] = True
    return masks


def _average_precision(scores: Tensor, positives: Tensor, trapezoid: bool) -> tuple[Tensor, Tensor]:
    """Per-query AP and whether the query has a positive; ``scores`` hold ``-inf`` on removed items."""
    index, valid = select_columns(positives)
    rank, rank_pos, valid = positive_ranks(scores, index, valid)
    rank, rank_pos = rank.to(torch.float64), rank_pos.to(torch.float64)
    precision = rank_pos / rank.clamp(min=1.0)
    if trapezoid:  # mean of the precisions just before and at each positive (revisitop's compute_ap)
        before = torch.where(rank > 1, (rank_pos - 1.0) / (rank - 1.0).clamp(min=1.0), 1.0)
        precision = (precision + before) / 2.0
    count = valid.sum(1)
    ap = torch.where(valid, precision, 0.0).sum(1) / count.clamp(min=1)
    return ap, count > 0


def revisited_map(
    embeddings: Tensor,
    ref_embeddings: Tensor,
    gnd: Sequence[Mapping[str, Sequence[int]]],
    *,
    trapezoid: bool = False,
    chunk_size: int | None = None,
) -> dict[str, float | int]:
    """mAP of each Revisited Oxford/Paris protocol.

    Args:
        embeddings: ``[Q, D]`` query embeddings (score = dot product).
        ref_embeddings: ``[N, D]`` gallery embeddings (optionally with the R1M distractors appended).
        gnd: one mapping per query with ``'easy'``, ``'hard'`` and ``'junk'`` lists of gallery indices (the ``gnd``
            entries of revisitop's ``gnd_roxford5k.pkl``; other keys such as ``'bbx'`` are ignored).
        trapezoid: ``False`` = the exact AP ([spec §1][spec-metrics], ``(1/R) sum rank+/rank``); ``True`` = revisitop's
            ``compute_ap``, which averages the precision just before and at each positive (trapezoidal rule), to
            compare with published numbers (they differ by up to ~1 point).
        chunk_size: queries per chunk (``None`` = automatic).

    Returns:
        ``{"map_easy", "map_medium", "map_hard"}`` (floats) and ``num_queries`` (int). Ties are pessimistic.

    Raises:
        ValueError: ``len(gnd)`` differs from the number of queries, a list is missing or indexes outside the gallery,
            or a protocol has no query with a positive.

    Example:
        >>> q = torch.tensor([[1.0, 0.0]])
        >>> g = torch.tensor([[0.9, 0.1], [0.8, 0.2], [0.7, 0.3], [0.1, 0.9]])
        >>> out = revisited_map(q, g, [{"easy": [0], "hard": [2], "junk": [1]}])
        >>> out["map_easy"], round(out["map_medium"], 4), out["map_hard"]
        (1.0, 1.0, 1.0)
    """
    x = prepare_inputs(
        embeddings,
        torch.zeros(embeddings.shape[0], dtype=torch.long),
        ref_embeddings=ref_embeddings,
        ref_labels=torch.zeros(ref_embeddings.shape[0], dtype=torch.long),
    )
    num_queries, num_refs = x.queries.shape[0], x.refs.shape[0]
    if len(gnd) != num_queries:
        raise ValueError(f"`gnd` has {len(gnd)} entries but there are {num_queries} queries: give one entry per query.")
    masks = _index_masks(gnd, num_refs, x.queries.device)
    chunk = chunk_size or metrics_chunk_size(num_queries, num_refs, 1, x.queries.device)
    totals: dict[str, list[Any]] = {name: [torch.zeros((), dtype=torch.float64), 0] for name in _PROTOCOLS}
    refs_t = x.refs.T.contiguous()
    for start in range(0, num_queries, chunk):
        rows = slice(start, min(start + chunk, num_queries))
        scores = x.queries[rows] @ refs_t
        for name, (positive_keys, removed_keys) in _PROTOCOLS.items():
            positives = torch.stack([masks[k][rows] for k in positive_keys]).any(0)
            removed = torch.stack([masks[k][rows] for k in removed_keys]).any(0) & ~positives
            ap, has_positive = _average_precision(scores.masked_fill(removed, float("-inf")), positives, trapezoid)
            totals[name][0] = totals[name][0] + ap[has_positive].sum().cpu()
            totals[name][1] += int(has_positive.sum())
    out: dict[str, float | int] = {}
    for name, (total, count) in totals.items():
        if count == 0:
            raise ValueError(f"No query has a positive under the {name!r} protocol: check the `gnd` lists.")
        out[f"map_{name}"] = float(total / count)
    out["num_queries"] = num_queries
    return out
