"""mAP of Revisited Oxford and Paris under the easy / medium / hard protocols (Radenović et al., CVPR 2018).

Each query comes with three lists of gallery indices: ``easy`` and ``hard`` positives and ``junk``. The protocols
say which lists are positives and which are removed (``PROTOCOLS``, defined in :mod:`ranklit.landmarks._protocols`,
where the dataset reads them too)::

    easy:    positives = easy          removed = junk + hard
    medium:  positives = easy + hard   removed = junk
    hard:    positives = hard          removed = junk + easy

Removed items are taken out of the query's ranking before computing AP and mP@k (so before the tie groups of the
``ties`` policy are formed: a removed item ties with nothing); queries without a positive in a protocol are left out
of that protocol's means. The gallery may be a descriptor set on disk (the R1M distractors):
the scores are computed chunk by chunk.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from ranklit.functional.inputs import check_embeddings, compute_dtype
from ranklit.functional.metrics.binary import average_precision, expected_precisions
from ranklit.functional.metrics.engine import metrics_chunk_size, positive_counts
from ranklit.functional.ranking import select_columns
from ranklit.functional.ties import TiedPositives, check_ties, tie_positives
from ranklit.index import Descriptors, MappedDescriptors, as_descriptors, query_scores
from ranklit.landmarks._protocols import PROTOCOLS

__all__ = ["PROTOCOLS", "revisited_map"]


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


def _protocol_metrics(
    scores: Tensor, positives: Tensor, trapezoid: bool, precision_at: tuple[int, ...], ties: str
) -> tuple[dict[str, Tensor], Tensor]:
    """Per-query AP and mP@k and whether the query has a positive; ``scores`` hold ``-inf`` on removed items."""
    index, valid = select_columns(positives)
    descending, valid, at_least, above = positive_counts(scores, index, valid, strict=ties != "pessimistic")
    tied = tie_positives(descending, valid, at_least, above, ties)
    ap = average_precision(tied)
    if trapezoid:  # mean of the precisions just before and at each positive (revisitop's compute_ap)
        ap = (ap + _precision_before(tied)) / 2.0
    out = {"map": ap}
    for k in precision_at:  # revisitop's compute_map: P@k' with k' = min(k, rank of the last positive)
        out[f"mp_at_{k}"] = _precision_at_last(tied, k)
    return out, tied.num_positives > 0


def _precision_before(t: TiedPositives) -> Tensor:
    """``(1/R) sum_k (rank+(k) - 1) / (rank(k) - 1)`` (1 at rank 1), the lower half of revisitop's trapezoid.

    Under ``"average"`` the member at position ``i`` of a tie group, when a positive, has ``a+ + (i - 1) s``
    positives above it (``s = (p - 1)/(n - 1)``) and ``a - 1 + i`` items: :func:`expected_precisions` with ``a`` and
    ``a+`` one lower; a group at the top (``a = 0``) sums to ``1 + (n - 1) s``.
    """
    if t.rank is not None:
        assert t.rank_pos is not None
        before = torch.where(t.rank > 1, (t.rank_pos - 1.0) / (t.rank - 1.0).clamp(min=1.0), 1.0)
        return torch.where(t.positive, before, 0.0).sum(1) / t.num_positives.clamp(min=1.0)
    assert t.above is not None and t.size is not None
    top = t.above == 0
    shifted = replace(t, above=torch.where(top, 1.0, t.above - 1.0), above_pos=t.above_pos - 1.0)
    share = (t.group_pos - 1.0) / (t.size - 1.0).clamp(min=1.0)
    values = torch.where(top, (1.0 + (t.size - 1.0) * share) / t.size, expected_precisions(shifted, t.size))
    return torch.where(t.positive, values, 0.0).sum(1) / t.num_positives.clamp(min=1.0)


def _precision_at_last(t: TiedPositives, k: int) -> Tensor:
    """revisitop's mP@k of each query: ``P@k'`` with ``k' = min(k, rank of the last positive)``.

    Under ``"average"``, with ``a``, ``n``, ``p``, ``a+`` those of the last positive's tie group and ``m`` the
    position of its last positive (``P(m) = C(m - 1, p - 1) / C(n, p)``, ``p <= m <= n``): ``R / (a + m)`` when
    ``a + m <= k``; otherwise ``P@k``, whose expected count of positives is ``sum_j min(1, max(0, k - a_j) / n_j)``
    over the positives ``j`` (their groups' ``a`` and ``n``) when ``k <= a``, and ``a+ + (p - 1)(k - a)/(m - 1)``
    when the cut falls inside the last group.
    """
    r = t.num_positives
    last = (r.long() - 1).clamp(min=0)[:, None]
    if t.rank is not None:
        final = t.rank.gather(1, last)[:, 0] if t.rank.shape[1] else r.new_zeros(r.shape)
        cut = final.clamp(max=float(k)).clamp(min=1.0)
        return (t.positive & (t.rank <= cut[:, None])).sum(1) / cut
    assert t.above is not None and t.size is not None
    if t.above.shape[1] == 0:
        return r.new_zeros(r.shape)
    a, n = t.above.gather(1, last), t.size.gather(1, last)
    p, a_pos = t.group_pos.gather(1, last), t.above_pos.gather(1, last)
    reached = torch.where(t.positive, ((k - t.above) / t.size).clamp(0.0, 1.0), 0.0).sum(1, keepdim=True)
    width = int(n.max())
    m = torch.arange(1, width + 1, dtype=torch.float64, device=n.device)[None, :]
    log_prob = (torch.lgamma(m) - torch.lgamma(p) - torch.lgamma((m - p).clamp(min=0.0) + 1)
                - torch.lgamma(n + 1) + torch.lgamma(p + 1) + torch.lgamma((n - p).clamp(min=0.0) + 1))
    prob = torch.where((m >= p) & (m <= n), torch.exp(log_prob), 0.0)
    inside = a_pos + (p - 1.0) * (k - a) / (m - 1.0).clamp(min=1.0)
    precision = torch.where(a + m <= k, r[:, None] / (a + m), torch.where(a >= k, reached, inside) / k)
    return (prob * precision).sum(1)


def _check_precision_at(precision_at: Sequence[int]) -> tuple[int, ...]:
    values = tuple(precision_at)
    if any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in values):
        raise ValueError(f"`precision_at` must hold positive integers (e.g. (1, 5, 10)), got {precision_at!r}.")
    return values


def revisited_map(
    embeddings: Tensor,
    ref_embeddings: Tensor | Descriptors,
    gnd: Sequence[Mapping[str, Sequence[int]]],
    *,
    precision_at: Sequence[int] = (),
    trapezoid: bool = False,
    ties: str = "pessimistic",
    chunk_size: int | None = None,
) -> dict[str, float | int]:
    """mAP (and mP@k) of each Revisited Oxford/Paris protocol.

    mP@k is revisitop's: for a query whose last positive (after removal) is at rank ``r``, ``P@k'`` with
    ``k' = min(k, r)``, so a query with fewer than ``k`` positives all ranked first scores 1.

    Args:
        embeddings: ``[Q, D]`` query embeddings (L2-normalised here; score = dot product).
        ref_embeddings: ``[N, D]`` gallery embeddings (optionally with the R1M distractors appended), a tensor or a
            descriptor set (:mod:`ranklit.index.descriptors`) streamed chunk by chunk: memory ``O(Q·N)``
            scores, never the ``N·D`` gallery. Rows are L2-normalised as they are read.
        gnd: one mapping per query with ``'easy'``, ``'hard'`` and ``'junk'`` lists of gallery indices (the ``gnd``
            entries of revisitop's ``gnd_roxford5k.pkl``; other keys such as ``'bbx'`` are ignored).
        precision_at: the ``k`` of the mP@k reported (revisitop: 1, 5, 10).
        trapezoid: ``False`` = the exact AP ([spec §1][spec-metrics], ``(1/R) sum rank+/rank``); ``True`` =
            revisitop's ``compute_ap``, which averages the precision just before and at each positive (trapezoidal
            rule), to compare with published numbers (they differ by up to ~1 point).
        ties: ``"pessimistic"`` (default), ``"average"`` or ``"optimistic"``: the value of each metric under the
            worst ordering of each group of equal scores, the mean over its orderings (closed form) or the best
            ([spec §0][spec-ties]), as for :func:`~ranklit.functional.retrieval_metrics`. The removed items (junk,
            and the other list of the easy and hard protocols) are taken out of the ranking first: a positive
            tied with a junk image is not tied with it, and the tie groups hold positives and negatives only.
        chunk_size: queries per chunk (``None`` = automatic).

    Returns:
        ``map_<protocol>`` and ``mp_at_<k>_<protocol>`` (floats) for ``easy``, ``medium``, ``hard``, and
        ``num_queries`` (int).

    Raises:
        ValueError: ``len(gnd)`` differs from the number of queries, or a list is missing or indexes outside the
            gallery. A protocol where no query has a positive gives NaN values and a ``UserWarning``.

    Example:
        >>> q = torch.tensor([[1.0, 0.0]])
        >>> g = torch.tensor([[0.9, 0.1], [0.8, 0.2], [0.1, 0.9], [0.7, 0.3]])
        >>> out = revisited_map(q, g, [{"easy": [0], "hard": [2], "junk": [1]}], precision_at=(1, 2))
        >>> out["map_easy"], round(out["map_medium"], 4), out["mp_at_2_medium"], out["mp_at_2_hard"]
        (1.0, 0.8333, 0.5, 0.5)
    """
    check_embeddings(embeddings)
    precision_at, ties = _check_precision_at(precision_at), check_ties(ties)
    dtype = compute_dtype(embeddings.dtype)
    queries = torch.nn.functional.normalize(embeddings.detach().to(dtype), dim=1)
    gallery = as_descriptors(ref_embeddings)
    if gallery.dim != queries.shape[1]:
        raise ValueError(f"`ref_embeddings` have {gallery.dim} dimensions but `embeddings` have {queries.shape[1]}.")
    normalised = MappedDescriptors(gallery, lambda rows: torch.nn.functional.normalize(rows, dim=1), gallery.dim)
    num_queries, num_refs = queries.shape[0], gallery.num_rows
    if len(gnd) != num_queries:
        raise ValueError(f"`gnd` has {len(gnd)} entries but there are {num_queries} queries: give one entry per query.")
    masks = _index_masks(gnd, num_refs, queries.device)
    all_scores = query_scores(queries, normalised)
    chunk = chunk_size or metrics_chunk_size(num_queries, num_refs, 1, queries.device)
    totals: dict[str, dict[str, Any]] = {name: {"count": 0} for name in PROTOCOLS}
    for start in range(0, num_queries, chunk):
        rows = slice(start, min(start + chunk, num_queries))
        scores = all_scores[rows]
        for name, (positive_keys, removed_keys) in PROTOCOLS.items():
            positives = torch.stack([masks[k][rows] for k in positive_keys]).any(0)
            removed = torch.stack([masks[k][rows] for k in removed_keys]).any(0) & ~positives
            values, has_positive = _protocol_metrics(
                scores.masked_fill(removed, float("-inf")), positives, trapezoid, precision_at, ties
            )
            for key, value in values.items():
                totals[name][key] = totals[name].get(key, 0.0) + value[has_positive].sum().cpu()
            totals[name]["count"] += int(has_positive.sum())
    out: dict[str, float | int] = {}
    for name, total in totals.items():
        if total["count"] == 0:
            warnings.warn(f"No query has a positive under the {name!r} protocol: its metrics are NaN.", stacklevel=2)
        keys = ("map", *(f"mp_at_{k}" for k in precision_at))
        out.update({f"{key}_{name}": float(total.get(key, 0.0) / total["count"]) if total["count"] else float("nan")
                    for key in keys})
    out["num_queries"] = num_queries
    return out
