"""Smooth-rank AP losses: Smooth-AP (Brown et al. 2020) and SupAP (Ramzi et al., ROADMAP, NeurIPS 2021).

Both write the AP of query ``q`` from the ranks of its positives ``k`` ([spec §1–2][spec-metrics])::

    AP_q = (1/R) sum_{k in P_q} rank+(k) / rank(k)
    rank+(k) = 1 + sum_{j in P_q, j != k} H(s_j - s_k),   rank(k) = rank+(k) + sum_{j in N_q} H(s_j - s_k)

and replace the step ``H`` by a smooth function. Only the positives are ranked: the differences ``s_j - s_k`` form a
``[Q, P, N]`` tensor with ``P`` the largest number of positives of a query (``K - 1`` in P x K batches), built chunk
of queries by chunk of queries (:func:`ranklit.functional.ranking.map_query_chunks`, checkpointed under autograd).
Time ``O(Q P N)``; peak memory ``O(chunk P N + Q N)``, never ``Q x N x N``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
from torch import Tensor

from ranklit._checks import check_chunk_size, check_in_range, check_positive
from ranklit.functional._kernels._rank_engine import check_engine, smooth_rank_engine
from ranklit.functional._kernels._rank_sums import RankSteps
from ranklit.functional._kernels._rank_sums_check import checked_rank_sums
from ranklit.functional.losses.contract import (
    check_offset,
    check_score_masks,
    reduce_ap_loss,
    require_positive_queries,
    resolve_chunk_size,
)
from ranklit.functional.ranking import (
    heaviside,
    map_query_chunks,
    select_columns,
    selected_differences,
    sigmoid_step,
    supap_upper_step,
)
from ranklit.functional.reducers import Reducer

__all__ = ["SupAPOptions", "smooth_ap_loss", "supap_loss"]


@dataclass(frozen=True)
class SupAPOptions:
    """The options of SupAP's upper bound ``H^-`` ([spec §2][spec-supap]), validated in one place: :func:`supap_loss`,
    :class:`ranklit.losses.SupAPLoss` and :class:`ranklit.losses.ROADMAPLoss` take them as explicit keywords (same
    names and defaults, checked by the tests) and validate them here; :class:`ranklit.functional.HAPOptions` extends
    them.

    ``tau``, ``rho``, ``delta`` > 0 and ``offset``, ``start`` >= 0 keep ``H^-`` a step function bounded below by the
    sigmoid; a wrong value raises ``ValueError`` naming it, an unknown keyword ``TypeError``.

    Args:
        tau: temperature of the sigmoid of ``H^-`` (0.01).
        rho: slope of the linear part of ``H^-``, beyond ``delta`` (100).
        delta: where the linear part of ``H^-`` starts (0.05).
        chunk_size: queries per chunk (``None``: from a memory budget,
            :func:`~ranklit.functional.ranking.default_chunk_size`).
        offset: value of ``H^-`` just after ``delta`` (:func:`~ranklit.functional.ranking.supap_upper_step`;
            ``None``: ``sigma(delta/tau) + start``, continuous, the paper; the authors' configs: 1.44, iNaturalist
            1.0; [spec §6][spec-released-code]).
        start: jump of ``H^-`` on ``(0, delta]`` (0.5: the paper and the released configs; on iNaturalist 0).
        engine: ``"auto"`` (Triton kernels on CUDA tensors when Triton imports, else torch), ``"torch"`` or
            ``"triton"`` (:func:`~ranklit.functional.smooth_rank_engine`; [spec §2][spec-engines]).

    Example:
        >>> SupAPOptions(offset=1.44, start=0).start
        0.0
        >>> SupAPOptions(delta=0.0)
        Traceback (most recent call last):
        ...
        ranklit.errors.UserError: `delta` must be a finite number > 0, got 0.0.
    """

    tau: float = 0.01
    rho: float = 100.0
    delta: float = 0.05
    chunk_size: int | None = None
    offset: float | None = None
    start: float = 0.5
    engine: str = "auto"

    def __post_init__(self) -> None:
        for name, value in self._checked().items():  # the checked values (ints become floats) in the frozen fields
            object.__setattr__(self, name, value)

    def _checked(self) -> dict[str, object]:
        """Every field's validated value (a subclass adds its own fields')."""
        positive = {name: check_positive(name, getattr(self, name)) for name in ("tau", "rho", "delta")}
        return positive | {
            "chunk_size": check_chunk_size("chunk_size", self.chunk_size),
            "offset": check_offset(self.offset),
            "start": check_in_range("start", self.start, 0.0, math.inf),
            "engine": check_engine(self.engine),
        }

    def steps(self) -> RankSteps:
        """The kernels' steps: SupAP's bounds with these options."""
        return RankSteps(False, self.tau, self.rho, self.delta, self.offset, self.start)


def smooth_ap_loss(
    scores: Tensor,
    positives: Tensor,
    valid: Tensor | None = None,
    *,
    tau: float = 0.01,
    chunk_size: int | None = None,
    reducer: str | Reducer = "mean",
    query_classes: Tensor | None = None,
    engine: str = "auto",
) -> Tensor:
    """Smooth-AP loss (Brown et al., ECCV 2020): every Heaviside step replaced by ``sigma(x / tau)``::

        L = 1 - mean_q (1/R_q) sum_{k in P_q} (1 + sum_{j in P_q, j!=k} sig(s_j - s_k))
                                             / (1 + sum_{j in Omega_q, j!=k} sig(s_j - s_k))

    with ``sig(x) = sigma(x / tau)``, exponent clamped to ``+-50``. Unlike the authors' code the query is not part of
    its own ranking ([spec §0][spec-conventions]). Queries without a positive are skipped: the terms ``1 - AP_q`` of
    the others go to the ``reducer`` (:mod:`ranklit.functional.reducers`; ``"mean"`` gives the formula above).

    Args:
        scores: ``[Q, N]`` cosine similarities of each query to its retrieval set.
        positives: ``[Q, N]`` bool, ``True`` where the item shares the query's (fine) label.
        valid: ``[Q, N]`` bool, ``False`` for items removed from the query's ranking (the query itself); all kept
            when ``None``.
        tau: sigmoid temperature (default 0.01).
        chunk_size: queries per chunk (default: :func:`~ranklit.functional.ranking.default_chunk_size`).
        reducer: ``"mean"``, ``"class_balanced"``, ``"active"``, ``"none"`` or a
            :class:`~ranklit.functional.Reducer`.
        query_classes: ``[Q]`` finest class of each query (needed by ``"class_balanced"``).
        engine: ``"auto"``, ``"torch"`` or ``"triton"``: who computes the sums
            (:func:`~ranklit.functional.smooth_rank_engine`); the engines agree to float32 round-off.

    Returns:
        Scalar loss in ``[0, 1)`` (``[Q]`` with ``reducer="none"``).

    Cost: time ``O(Q P N)``, memory ``O(chunk P N + Q N)`` with ``P`` the largest number of positives per query
    (Triton engine: ``O(Q N)``, ``chunk_size`` unused).

    Example:
        >>> s = torch.tensor([[0.9, 0.1, 0.8]])
        >>> round(smooth_ap_loss(s, torch.tensor([[True, False, True]])).item(), 4)
        0.0
    """
    tau = check_positive("tau", tau)
    chunk_fn, steps = partial(_smooth_ap_chunk, tau=tau), RankSteps(True, tau)
    ap, keep = _smooth_rank_ap(chunk_fn, steps, scores, positives, valid, chunk_size, check_engine(engine))
    return reduce_ap_loss(ap, keep, reducer, query_classes)


def supap_loss(
    scores: Tensor,
    positives: Tensor,
    valid: Tensor | None = None,
    *,
    tau: float = 0.01,
    rho: float = 100.0,
    delta: float = 0.05,
    chunk_size: int | None = None,
    offset: float | None = None,
    start: float = 0.5,
    engine: str = "auto",
    reducer: str | Reducer = "mean",
    query_classes: Tensor | None = None,
) -> Tensor:
    """SupAP loss (Ramzi et al., ROADMAP, NeurIPS 2021, Eq. 4-5): an upper bound of ``1 - AP``::

        L = 1 - mean_q (1/R_q) sum_{k in P_q} rank+(k) / (rank+(k) + sum_{j in N_q} H^-(s_j - s_k))

    ``rank+`` uses the exact step (no gradient) and the negatives the upper bound ``H^-``
    (:func:`~ranklit.functional.ranking.supap_upper_step`): ``sigma(t/tau)`` for ``t <= 0``, ``+ 0.5`` on
    ``(0, delta]`` and a slope ``rho`` beyond ``delta``. Since ``H^- >= H`` off ties, ``L >= 1 - AP``; an exact tie
    of a negative with a positive (``H(0) = 1`` but ``H^-(0) = 0.5``) is the only exception. The defaults are the
    paper's; the authors' configs (``offset = 1.44``, on iNaturalist ``offset = 1.0, start = 0``) are the options
    ``offset`` and ``start``. The query is excluded from its own ranking. Queries without a positive are skipped; the
    terms ``1 - AP_q`` of the others go to the ``reducer``.

    Args:
        scores: ``[Q, N]`` cosine similarities.
        positives: ``[Q, N]`` bool positives mask.
        valid: ``[Q, N]`` bool mask of the items in each query's ranking (``None`` = all).
        tau: temperature of the sigmoid of ``H^-`` (0.01).
        rho: slope of the linear part of ``H^-``, beyond ``delta`` (100).
        delta: where the linear part of ``H^-`` starts (0.05).
        chunk_size: queries per chunk (``None``: from a memory budget).
        offset: value of ``H^-`` just after ``delta`` (``None``: continuous, the paper; the authors' configs: 1.44,
            iNaturalist 1.0).
        start: jump of ``H^-`` on ``(0, delta]`` (0.5; the authors' iNaturalist config: 0).
        engine: ``"auto"``, ``"torch"`` or ``"triton"``: who computes the sums
            (:func:`~ranklit.functional.smooth_rank_engine`); the engines agree to float32 round-off.
        reducer: ``"mean"``, ``"class_balanced"``, ``"active"``, ``"none"`` or a
            :class:`~ranklit.functional.Reducer`.
        query_classes: ``[Q]`` finest class of each query (needed by ``"class_balanced"``).

    The options are validated by :class:`SupAPOptions`.

    Returns:
        Scalar loss in ``[0, 1)`` (``[Q]`` with ``reducer="none"``).

    Cost: time ``O(Q P N)``, memory ``O(chunk P N + Q N)``.

    Example:
        >>> s = torch.tensor([[0.9, 0.1, 0.8]])
        >>> round(supap_loss(s, torch.tensor([[True, False, False]])).item(), 4)
        0.0
    """
    opts = SupAPOptions(
        tau=tau, rho=rho, delta=delta, chunk_size=chunk_size, offset=offset, start=start, engine=engine
    )
    chunk_fn = partial(_supap_chunk, options=opts)
    ap, keep = _smooth_rank_ap(chunk_fn, opts.steps(), scores, positives, valid, opts.chunk_size, opts.engine)
    return reduce_ap_loss(ap, keep, reducer, query_classes)


def _smooth_rank_ap(
    chunk_fn: Callable[..., Tensor],
    steps: RankSteps,
    scores: Tensor,
    positives: Tensor,
    valid: Tensor | None,
    chunk_size: int | None,
    engine: str,
) -> tuple[Tensor, Tensor]:
    """Per-query smooth AP ``[Q]`` and the ``[Q]`` mask of the queries with a positive: by ``chunk_fn`` on chunks of
    queries (torch engine) or by the kernels with ``steps`` (Triton engine)."""
    valid = check_score_masks(scores, positives, valid)
    positives = positives & valid
    has_positive = require_positive_queries(positives)
    index, ranked = select_columns(positives)
    if smooth_rank_engine(scores, engine) == "triton":
        codes = positives.to(torch.int8) + valid.to(torch.int8) - 1  # 1 positive, 0 negative, -1 outside
        rank, rank_pos = checked_rank_sums(scores, codes, None, index, ranked, steps, forced=engine == "triton")
        return _mean_ratio(rank_pos, rank, ranked), has_positive
    size = resolve_chunk_size(chunk_size, scores.shape[0], index.shape[1], scores.shape[1])
    ap = map_query_chunks(chunk_fn, scores, positives, valid, index, ranked, chunk_size=size)
    return ap, has_positive


def _others(index: Tensor, num_refs: int) -> Tensor:
    """``[Q, P, N]`` mask, ``False`` at the ranked item's own column (``j != k``)."""
    return torch.arange(num_refs, device=index.device)[None, None, :] != index[:, :, None]


def _mean_ratio(numerator: Tensor, denominator: Tensor, ranked: Tensor) -> Tensor:
    """Per-query mean of ``numerator / denominator`` over the real (non-padding) ranked items."""
    ratio = torch.where(ranked, numerator / denominator, torch.zeros_like(numerator))
    return ratio.sum(dim=1) / ranked.sum(dim=1).clamp(min=1)


def _smooth_ap_chunk(
    scores: Tensor, positives: Tensor, valid: Tensor, index: Tensor, ranked: Tensor, *, tau: float
) -> Tensor:
    steps = sigmoid_step(selected_differences(scores, index), tau)
    steps = torch.where(valid[:, None, :] & _others(index, scores.shape[1]), steps, torch.zeros_like(steps))
    rank = 1.0 + steps.sum(dim=-1)
    rank_pos = 1.0 + (steps * positives[:, None, :]).sum(dim=-1)
    return _mean_ratio(rank_pos, rank, ranked)


def _supap_chunk(
    scores: Tensor, positives: Tensor, valid: Tensor, index: Tensor, ranked: Tensor, *, options: SupAPOptions
) -> Tensor:
    diff = selected_differences(scores, index)
    exact = heaviside(diff.detach()) * (positives[:, None, :] & _others(index, scores.shape[1]))
    rank_pos = 1.0 + exact.sum(dim=-1)
    upper = supap_upper_step(diff, options.tau, options.rho, options.delta, options.offset, options.start)
    negatives = (valid & ~positives)[:, None, :]
    rank_neg = torch.where(negatives, upper, torch.zeros_like(upper)).sum(dim=-1)
    return _mean_ratio(rank_pos, rank_pos + rank_neg, ranked)
