"""Per-query binary retrieval metrics from the ranked positives, under a tie policy ([spec §1][spec-metrics]).

Every metric is declared once, in :data:`BINARY_METRICS` (its key, the function giving its per-query values and, for
a metric with a cut-off, the option naming the cut-offs): the functional API, ``RetrievalMetrics``, the per-level
keys of hierarchical labels and the DDP reduction all read that table. Adding a metric is one entry and its function.

Each function takes a :class:`~ranklit.functional.ties.TiedPositives` and returns ``[C]`` float64 values (0 for a query
without a positive). Under ``"pessimistic"`` and ``"optimistic"`` they read the positives' ranks in that ordering;
under ``"average"`` they are the expectation over the orderings of every tie group, in closed form. For a group with
``a`` items above it, ``n`` members, ``p`` positives and ``a+`` positives above it, the member at position ``t`` is a
positive with probability ``p / n`` and then has ``a+ + 1 + (t - 1)(p - 1)/(n - 1)`` positives at or above it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from ranklit.functional.ties import TiedPositives

__all__ = ["BinaryMetric", "BINARY_METRICS", "binary_keys", "binary_query_metrics", "expected_precisions"]


def _harmonic(above: Tensor, stop: Tensor) -> Tensor:
    """``sum_{t=1..stop} 1 / (above + t)`` (exact for ``stop <= 1``, digamma differences otherwise)."""
    long = torch.special.digamma(above + stop + 1.0) - torch.special.digamma(above + 1.0)
    return torch.where(stop <= 1.0, stop / (above + 1.0), long)


def expected_precisions(t: TiedPositives, stop: Tensor) -> Tensor:
    """Per positive, ``1/p`` of the expected sum of ``rank+/rank`` over its group's positions ``1..stop``."""
    assert t.above is not None and t.size is not None
    a, n = t.above, t.size
    stop = stop.clamp(min=0.0).minimum(n)
    harmonic = _harmonic(a, stop)
    share = (t.group_pos - 1.0) / (n - 1.0).clamp(min=1.0)
    return ((t.above_pos + 1.0) * harmonic + share * (stop - (a + 1.0) * harmonic)) / n


def _per_query(t: TiedPositives, values: Tensor, denominator: Tensor | None = None) -> Tensor:
    total = torch.where(t.positive, values, 0.0).sum(1)
    return total / (t.num_positives if denominator is None else denominator).clamp(min=1.0)


def average_precision(t: TiedPositives) -> Tensor:
    """``AP = (1/R) sum_k rank+(k) / rank(k)``."""
    if t.rank is None:
        assert t.size is not None
        return _per_query(t, expected_precisions(t, t.size))
    assert t.rank_pos is not None
    return _per_query(t, t.rank_pos / t.rank)


def map_at_r(t: TiedPositives) -> Tensor:
    """``mAP@R = (1/R) sum_{k : rank(k) <= R} rank+(k) / rank(k)`` (Musgrave et al. 2020)."""
    r = t.num_positives[:, None]
    if t.rank is None:
        assert t.above is not None
        return _per_query(t, expected_precisions(t, r - t.above))
    assert t.rank_pos is not None
    return _per_query(t, torch.where(t.rank <= r, t.rank_pos / t.rank, 0.0))


def r_precision(t: TiedPositives) -> Tensor:
    """``R-precision = #{k : rank(k) <= R} / R`` (torchmetrics' ``RetrievalRPrecision``)."""
    r = t.num_positives[:, None]
    if t.rank is None:
        assert t.above is not None and t.size is not None
        return _per_query(t, ((r - t.above) / t.size).clamp(0.0, 1.0))
    return _per_query(t, (t.rank <= r).to(torch.float64))


def _first(t: TiedPositives, values: Tensor | None) -> Tensor:
    """The value of each row's best positive (0 for rows with no entry at all)."""
    assert values is not None
    if values.shape[1] == 0:
        return values.new_zeros(values.shape[0])
    return values.gather(1, t.first)[:, 0]


def hit_rate(t: TiedPositives, k: int) -> Tensor:
    """Recall@k of deep metric learning: ``1`` if a positive has rank ``<= k`` (P@1 for ``k = 1``).

    Under ``"average"``: ``1 - C(n - p, m) / C(n, m)`` for the best positive's group, ``m = k - a`` of its members in
    the top ``k``.
    """
    has_positive = t.num_positives > 0
    if t.rank is not None:
        return (has_positive & (_first(t, t.rank) <= k)).to(torch.float64)
    a, n, p = _first(t, t.above), _first(t, t.size), _first(t, t.group_pos)
    drawn = (k - a).clamp(0.0).minimum(n)
    negatives = n - p
    log_miss = (torch.lgamma(negatives + 1) - torch.lgamma((negatives - drawn).clamp(min=0.0) + 1)
                - torch.lgamma(n + 1) + torch.lgamma(n - drawn + 1))
    miss = torch.where(drawn > negatives, 0.0, torch.exp(log_miss))
    return torch.where(has_positive, 1.0 - miss, 0.0)


def reciprocal_rank(t: TiedPositives) -> Tensor:
    """``1 / rank`` of the best positive (MRR is its mean; torchmetrics' ``RetrievalMRR``).

    Under ``"average"``: ``sum_t C(n - t, p - 1) / C(n, p) / (a + t)`` over the positions ``t`` of the first positive
    in the best positive's group (``O(n)`` terms per query).
    """
    has_positive = t.num_positives > 0
    if t.rank is not None:
        return torch.where(has_positive, 1.0 / _first(t, t.rank).clamp(min=1.0), 0.0)
    a, n, p = _first(t, t.above)[:, None], _first(t, t.size)[:, None], _first(t, t.group_pos)[:, None]
    last = n - p + 1.0  # the first positive is at one of the positions 1 .. n - p + 1
    width = int(last[has_positive].max()) if bool(has_positive.any()) else 1
    position = torch.arange(1, width + 1, dtype=torch.float64, device=n.device)[None, :]
    rest = (n - position).clamp(min=0.0)
    log_prob = (torch.lgamma(rest + 1) - torch.lgamma(p) - torch.lgamma((rest - p + 1).clamp(min=0.0) + 1)
                - torch.lgamma(n + 1) + torch.lgamma(p + 1) + torch.lgamma(n - p + 1))
    terms = torch.where(position <= last, torch.exp(log_prob) / (a + position), 0.0)
    return torch.where(has_positive, terms.sum(1), 0.0)


def _discounts(stop: Tensor) -> Tensor:
    """``D(m) = sum_{i=1..m} 1 / log2(1 + i)`` for integer-valued ``stop`` (via a table up to its maximum)."""
    size = int(stop.max()) if stop.numel() else 0
    positions = torch.arange(1, size + 1, dtype=torch.float64, device=stop.device)
    table = torch.cat([positions.new_zeros(1), (1.0 / torch.log2(1.0 + positions)).cumsum(0)])
    return table[stop.long()]


def ndcg_at(t: TiedPositives, k: int) -> Tensor:
    """NDCG@k with binary gains (torchmetrics' ``RetrievalNormalizedDCG(top_k=k)``); ``"average"`` gives every position
    of a tie group the group's mean gain (scikit-learn's ``ndcg_score``)."""
    ideal = _discounts(t.num_positives.clamp(max=float(k)))
    if t.rank is None:
        assert t.above is not None and t.size is not None
        a, n = t.above.clamp(max=float(k)), (t.above + t.size).clamp(max=float(k))
        values = (_discounts(torch.where(t.positive, n, 0.0)) - _discounts(torch.where(t.positive, a, 0.0))) / t.size
    else:
        values = torch.where(t.rank <= k, 1.0 / torch.log2(1.0 + t.rank), 0.0)
    return _per_query(t, values, ideal)


@dataclass(frozen=True)
class BinaryMetric:
    """One binary metric: its key (``{k}`` for the cut-off), its per-query values, its cut-off option, and what the
    documentation says of it (the metrics tables of the spec page and the metrics' API page are generated from here).

    Attributes:
        key: the result key, e.g. ``"map"`` or ``"recall_at_{k}"``.
        values: ``values(tied, k)`` -> ``[C]`` float64 (``k`` is ``None`` without a cut-off).
        cutoffs: the argument of ``retrieval_metrics`` listing the cut-offs (``"recall_at"``), ``None`` without.
        title: its name in the tables (``"mAP@R"``).
        definition: its definition there (Markdown, formulas between ``$``).
    """

    key: str
    values: Callable[[TiedPositives, int | None], Tensor]
    cutoffs: str | None = None
    title: str = ""
    definition: str = ""


BINARY_METRICS: tuple[BinaryMetric, ...] = (
    BinaryMetric(
        "map", lambda t, _: average_precision(t), title="AP",
        definition=r"$\frac{1}{R}\sum_{k\in\Omega^+}\frac{\text{rank}^+(k)}{\text{rank}(k)}$; mAP = mean over queries",
    ),
    BinaryMetric(
        "map_at_r", lambda t, _: map_at_r(t), title="mAP@R",
        definition=r"$\frac{1}{R}\sum_{k\in\Omega^+,\ \text{rank}(k)\le R}\frac{\text{rank}^+(k)}{\text{rank}(k)}$ "
        "(Musgrave et al. 2020; divides by $R$, not by the hits)",
    ),
    BinaryMetric(
        "precision_at_1", lambda t, _: hit_rate(t, 1), title="P@1",
        definition="1 if the rank-1 item is a positive (= Recall@1)",
    ),
    BinaryMetric(
        "recall_at_{k}", lambda t, k: hit_rate(t, _cut(k)), cutoffs="recall_at", title="Recall@k",
        definition=r"1 if a positive has rank $\le k$ (deep-metric-learning Recall@k = torchmetrics' "
        "`RetrievalHitRate`, not its `RetrievalRecall`)",
    ),
    BinaryMetric(
        "r_precision", lambda t, _: r_precision(t), title="R-precision",
        definition=r"$\frac{1}{R}\#\{k\in\Omega^+ : \text{rank}(k)\le R\}$ (torchmetrics' `RetrievalRPrecision`)",
    ),
    BinaryMetric(
        "mrr", lambda t, _: reciprocal_rank(t), title="MRR",
        definition=r"$1/\min_{k\in\Omega^+}\text{rank}(k)$ (torchmetrics' `RetrievalMRR`)",
    ),
    BinaryMetric(
        "ndcg_at_{k}", lambda t, k: ndcg_at(t, _cut(k)), cutoffs="ndcg_at", title="NDCG@k",
        definition=r"$\sum_{k'\in\Omega^+,\ \text{rank}(k')\le k}\frac{1}{\log_2(1+\text{rank}(k'))} \big/ "
        r"\sum_{i=1}^{\min(R,k)}\frac{1}{\log_2(1+i)}$, binary gains (torchmetrics' `RetrievalNormalizedDCG(top_k=k)`)",
    ),
)


def _cut(k: int | None) -> int:
    assert k is not None
    return k


def _instances(cutoffs: Mapping[str, tuple[int, ...]]) -> list[tuple[str, BinaryMetric, int | None]]:
    out: list[tuple[str, BinaryMetric, int | None]] = []
    for metric in BINARY_METRICS:
        if metric.cutoffs is None:
            out.append((metric.key, metric, None))
        else:
            out.extend((metric.key.format(k=k), metric, k) for k in cutoffs[metric.cutoffs])
    return out


def binary_keys(cutoffs: Mapping[str, tuple[int, ...]]) -> list[str]:
    """The keys of :data:`BINARY_METRICS` for the given cut-offs, in table order.

    >>> binary_keys({"recall_at": (1, 4), "ndcg_at": (10,)})
    ['map', 'map_at_r', 'precision_at_1', 'recall_at_1', 'recall_at_4', 'r_precision', 'mrr', 'ndcg_at_10']
    """
    return [key for key, _, _ in _instances(cutoffs)]


def binary_query_metrics(t: TiedPositives, cutoffs: Mapping[str, tuple[int, ...]]) -> dict[str, Tensor]:
    """Every metric of :data:`BINARY_METRICS` for each query of a chunk.

    Returns:
        ``{"has_positive": [C] bool, key: [C] float64 ...}``; values of queries without a positive are 0.

    Example:
        >>> from ranklit.functional.ties import tie_positives
        >>> ok = torch.ones(1, 2, dtype=torch.bool)
        >>> t = tie_positives(torch.tensor([[0.9, 0.5]]), ok, torch.tensor([[1, 3]]), None, "pessimistic")
        >>> out = binary_query_metrics(t, {"recall_at": (2,), "ndcg_at": (2,)})
        >>> [round(float(out[k]), 4) for k in ("map", "map_at_r", "precision_at_1", "mrr", "r_precision")]
        [0.8333, 0.5, 1.0, 1.0, 0.5]
    """
    out = {"has_positive": t.num_positives > 0}
    for key, metric, k in _instances(cutoffs):
        out[key] = metric.values(t, k)
    return out
