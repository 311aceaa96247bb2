"""The warning of :func:`ranklit.functional.retrieval_metrics` when many scores tie ([spec §0][spec-ties]).

An untrained or collapsed model maps many images to one embedding; the scores of those images are then equal, and
every figure depends on how their tie groups are ordered (the ``ties`` policy). The user should know, once per
evaluation, how large the share is and what the other two policies would report.

**What is counted.** The engine never sorts a row (it counts, per positive, the items scoring at least as high), so
it does not see the ties between negatives. A sample of the queries (1 % of them, between
:data:`MIN_SAMPLE_QUERIES` and :data:`SAMPLE_QUERIES`: :func:`sample_queries`), evenly spaced in the input order,
is scored against the whole retrieval set (the query itself and junk removed, as in the evaluation) and each of its
rows sorted (:func:`tied_counts`): the **tied share** is the fraction of the sampled scores that equal another score
of their row. Cost ``O(S N (D + log N))`` for ``S`` sampled queries, a few percent of the evaluation.

**When it warns.** When the tied share is at least :data:`TIED_SHARE` (10 %: float32 cosines of a trained model
rarely collide, a collapsed third of the set ties a third of every row) *and* the key figures of the sampled queries
differ between the ``"pessimistic"`` and ``"optimistic"`` policies (ties between negatives alone change nothing).
The message gives those figures under the three policies (the sampled queries are the whole set when ``Q <=``
:data:`MIN_SAMPLE_QUERIES`) and how to report another policy. The values returned are never changed.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from ranklit.functional._kernels._guard import KernelFallbackWarning
from ranklit.functional.inputs import RetrievalInputs, excluded_pairs
from ranklit.functional.ties import TIES, TiedScoresWarning

__all__ = [
    "MIN_SAMPLE_QUERIES", "SAMPLE_QUERIES", "TIED_SHARE", "sample_queries", "tied_counts", "tied_share", "warn_if_tied",
]

SAMPLE_QUERIES = 64
MIN_SAMPLE_QUERIES = 16
TIED_SHARE = 0.1
_KEYS = ("map_at_r", "map", "precision_at_1", "hap", "asi")  # those present are shown
_BLOCK_SCORES = 2**22  # scores sorted at a time (16 MiB of float32)

Evaluate = Callable[[RetrievalInputs, Tensor | None, str], dict[str, Tensor]]


def sample_queries(num_queries: int, device: torch.device) -> Tensor:
    """The sampled query positions, evenly spaced: 1 % of the queries, at least :data:`MIN_SAMPLE_QUERIES` (all of
    them when there are fewer) and at most :data:`SAMPLE_QUERIES`.

    Sorting a sampled row costs about three times its share of the evaluation's product (d = 128, 14 ns a score
    against 4.4 ns): with at most 1 % of the rows the check stays within a few percent of the evaluation (2,000
    queries against 8,000 items: 20 rows, about 3 ms of 60-110 ms; 64 rows cost a fifth of it with two threads).

    >>> [sample_queries(n, torch.device("cpu")).numel() for n in (5, 300, 2000, 100_000)]
    [5, 16, 20, 64]
    >>> sample_queries(6400, torch.device("cpu"))[:3].tolist()
    [0, 100, 200]
    """
    count = min(num_queries, max(MIN_SAMPLE_QUERIES, min(SAMPLE_QUERIES, num_queries // 100)))
    return torch.arange(count, device=device) * num_queries // count


def tied_share(x: RetrievalInputs, rows: Tensor, junk: Tensor | None) -> float:
    """Fraction of the scores of the queries ``rows`` that equal another score of their row (removed items aside).

    Example:
        Four items, two of them identical: each query sees the two copies tie (the query itself removed):

        >>> from ranklit.functional.inputs import prepare_inputs
        >>> x = prepare_inputs(torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.6, 0.8]]), torch.zeros(4).long())
        >>> round(tied_share(x, torch.arange(4), None), 3)
        0.333
    """
    num_refs = x.refs.shape[0]
    block = max(1, _BLOCK_SCORES // max(num_refs, 1))
    refs_t = x.refs.T
    tied = total = 0
    for part in rows.split(block):
        scores = x.queries[part] @ refs_t
        removed = excluded_pairs(None if x.query_ids is None else x.query_ids[part], x.ref_ids, num_refs)
        if removed is not None:
            scores.masked_fill_(removed, float("-inf"))
        if junk is not None:
            scores.masked_fill_(junk[part], float("-inf"))
        part_tied, part_total = tied_counts(scores)
        tied += part_tied
        total += part_total
    return tied / total if total else 0.0


def tied_counts(scores: Tensor) -> tuple[int, int]:
    """``(tied, finite)``: how many finite scores of the 2-D ``scores`` equal another score of their row, and how many
    are finite (``-inf`` marks a removed item). ``scores`` is overwritten (its rows sorted in place) on the CPU.

    Each row is sorted; a group of ``g`` equal scores then gives ``g - 1`` equal neighbours and one run of them, so
    ``tied = equal neighbours + runs``, less the removed items of the rows with two or more (they tie as ``-inf``).
    On the CPU the rows are sorted and compared in NumPy (``Tensor.numpy()`` shares the memory): one thread, 64 rows
    of 8,000 float32 scores take 7 ms against ``Tensor.sort``'s 31 ms, and the comparisons 0.4 ms against 3.4 ms for
    PyTorch's boolean slices, which made this check a third of a 2,000 x 8,000 evaluation. Elsewhere the same
    expressions run on the tensor's device.

    >>> inf = float("inf")
    >>> tied_counts(torch.tensor([[0.5, -inf, 0.2, 0.5, -inf], [0.1, 0.3, 0.1, 0.1, 0.4]]))
    (5, 8)
    """
    if scores.device.type == "cpu":
        ordered: Any = scores.detach().numpy()
        ordered.sort(axis=1)
    else:
        ordered = scores.detach().sort(dim=1).values
    equal = ordered[:, 1:] == ordered[:, :-1]
    runs = int(equal[:, :1].sum()) + int((equal[:, 1:] & ~equal[:, :-1]).sum())
    removed = (ordered == float("-inf")).sum(1)
    tied = int(equal.sum()) + runs - int((removed * (removed > 1)).sum())
    return tied, ordered.shape[0] * ordered.shape[1] - int(removed.sum())


def warn_if_tied(x: RetrievalInputs, junk: Tensor | None, ties: str, evaluate: Evaluate) -> None:
    """Warn (:class:`~ranklit.functional.ties.TiedScoresWarning`) when a large share of the scores tie (module doc).

    Args:
        x: the validated inputs of the evaluation.
        junk: ``[Q, N]`` removed items, or ``None``.
        ties: the evaluation's policy.
        evaluate: ``evaluate(inputs, junk, ties)`` -> the metrics (0-dim tensors) of ``inputs`` under ``ties``.
    """
    rows = sample_queries(x.queries.shape[0], x.queries.device)
    share = tied_share(x, rows, junk)
    if share < TIED_SHARE:
        return
    sample = replace(x, queries=x.queries[rows], query_labels=x.query_labels[rows],
                     query_ids=None if x.query_ids is None else x.query_ids[rows])
    with warnings.catch_warnings(record=True) as caught:  # the sample's own warnings (no positive in it, ...) are
        warnings.simplefilter("always")  # not the user's; a kernel falling back to torch is
        figures = {policy: evaluate(sample, None if junk is None else junk[rows], policy) for policy in TIES}
    for warning in caught:
        if issubclass(warning.category, KernelFallbackWarning):
            warnings.warn(warning.message, stacklevel=5)
    keys = [key for key in _KEYS if key in figures[ties]]
    if all(_same(figures["pessimistic"][key], figures["optimistic"][key]) for key in keys):
        return
    scope = "all" if rows.numel() == x.queries.shape[0] else f"{rows.numel()} evenly spaced"
    table = "; ".join(f"{key} " + " / ".join(f"{float(figures[p][key]):.3f}" for p in TIES) for key in keys)
    warnings.warn(
        f"{share:.0%} of the scores tie (equal scores within a query's ranking, over {scope} queries): the figures "
        f"depend on how each group of equal scores is ordered, and are reported under ties={ties!r}. On those "
        f"queries, {' / '.join(TIES)}: {table}. Identical embeddings (an untrained or collapsed model, duplicate "
        "images) are the usual cause; pass `ties=` to `retrieval_metrics`/`RetrievalMetrics` (config: "
        "`model.metric.init_args.ties`) to report another policy (docs/spec.md §0, Ranks and ties).",
        TiedScoresWarning,
        stacklevel=5,
    )


def _same(a: Tensor, b: Tensor) -> bool:
    return bool(torch.isclose(a, b, rtol=0.0, atol=5e-4, equal_nan=True))
