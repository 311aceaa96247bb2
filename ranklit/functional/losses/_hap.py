"""Smooth upper bound of ``1 - H-AP``, the hierarchical AP loss of HAPPIER (Ramzi et al., ECCV 2022, §3.2, Eq. 5).

For a query ``q`` and a relevant item ``k`` (level ``>= 1``) of its retrieval set, H-AP ([spec §1][spec-metrics]) uses

.. math::

    rank(k) = 1 + \\sum_{j \\ne k} H(s_j - s_k), \\qquad
    H\\text{-}rank(k) = rel(k) + \\sum_{j \\in \\Omega^+, j \\ne k} \\min(rel(k), rel(j)) H(s_j - s_k).

The surrogate replaces ``H`` by ROADMAP's upper bound ``H^-`` in ``rank`` for items ``j`` of **strictly lower** level
than ``k`` (negatives included), and by the lower bound ``H_lb`` in ``H-rank`` for items of **strictly higher** level
(``with_hrank=True``); every other step is the exact Heaviside and carries no gradient. The ranks are over-estimated
and the H-ranks under-estimated, so the loss ``mean_q (1 - H-AP^s_q)`` upper-bounds ``1 - H-AP`` on inputs without
ties. With one label column it is the SupAP loss of ROADMAP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import torch
from torch import Tensor

from ranklit._checks import check_in_range, check_positive
from ranklit.functional._kernels._rank_engine import smooth_rank_engine
from ranklit.functional._kernels._rank_sums import RankSteps
from ranklit.functional._kernels._rank_sums_check import checked_rank_sums
from ranklit.functional.losses._smooth_rank import SupAPOptions
from ranklit.functional.losses.contract import check_score_masks, reduce_ap_loss, resolve_chunk_size
from ranklit.functional.ranking import (
    heaviside,
    linear_lower_step,
    map_query_chunks,
    select_columns,
    selected_differences,
    supap_upper_step,
)
from ranklit.functional.reducers import Reducer
from ranklit.functional.relevance import relevance

__all__ = ["HAPOptions", "hap_surrogate", "hap_loss"]

_INTERMEDIATES = 4


@dataclass(frozen=True)
class HAPOptions(SupAPOptions):
    """The options of the H-AP surrogate, validated in one place: :func:`hap_surrogate`, :func:`hap_loss`,
    :class:`ranklit.losses.HAPLoss` and :class:`ranklit.losses.HAPPIERLoss` take them as explicit keywords (same names
    and defaults, checked by the tests) and validate them here.

    The rank uses SupAP's upper bound ``H^-``, so its options (``tau``, ``rho``, ``delta``, ``chunk_size``,
    ``offset``, ``start``, ``engine``) are those of :class:`ranklit.functional.SupAPOptions`, with the same defaults
    and checks. The steps keep their bound properties (``H^- >= H >= H_lb``): ``beta`` > 0, ``leak`` >= 0, ``gamma``
    in ``[0, 1]``; ``alpha`` >= 0. A wrong value raises ``ValueError`` naming it, an unknown keyword ``TypeError``.

    Args:
        alpha: relevance exponent of HAPPIER Eq. 4 (1 for HAPPIER, 5 / 3 for HAPPIER_F on SOP / iNaturalist).
        leak: slope of the lower bound ``H_lb`` (used in ``H-rank``) on negative differences.
        beta: slope of ``H_lb`` on positive differences.
        gamma: value of ``H_lb`` just after 0, in ``[0, 1]``.
        with_hrank: bound ``H-rank`` by ``H_lb`` on items of higher level (the paper); ``False`` keeps the exact,
            gradient-free step there, as the authors' configs do.

    ``chunk_size`` ``None`` picks :func:`ranklit.functional.ranking.default_chunk_size` for rows four times wider, as
    this loss keeps about four times as many intermediates as SupAP.

    Example:
        >>> HAPOptions(with_hrank=False, offset=1.44).offset
        1.44
        >>> HAPOptions(gamma=2.0)
        Traceback (most recent call last):
        ...
        ranklit.errors.UserError: `gamma` must be a number in [0.0, 1.0], got 2.0.
    """

    alpha: float = 1.0
    leak: float = 10.0
    beta: float = 25.0
    gamma: float = 0.5
    with_hrank: bool = True

    def _checked(self) -> dict[str, object]:
        return super()._checked() | {
            "alpha": check_in_range("alpha", self.alpha, 0.0, math.inf),
            "leak": check_in_range("leak", self.leak, 0.0, math.inf),
            "beta": check_positive("beta", self.beta),
            "gamma": check_in_range("gamma", self.gamma, 0.0, 1.0),
            "with_hrank": bool(self.with_hrank),
        }

    def steps(self) -> RankSteps:
        """The kernels' steps: H-AP's bounds with these options."""
        return RankSteps(False, self.tau, self.rho, self.delta, self.offset, self.start, self.leak, self.beta,
                         self.gamma, self.with_hrank)


def _hap_per_query(
    scores: Tensor,
    levels: Tensor,
    rel: Tensor,
    valid: Tensor,
    index: Tensor,
    ranked: Tensor,
    options: HAPOptions,
) -> Tensor:
    """Surrogate H-AP of a chunk of queries; every intermediate is ``[C, P, N]``."""
    diff = selected_differences(scores, index)
    exact = heaviside(diff.detach())
    level_k = levels.gather(1, index)[:, :, None]
    level_j = levels[:, None, :]
    columns = torch.arange(scores.shape[1], device=scores.device)
    counted = valid[:, None, :] & (columns[None, None, :] != index[:, :, None])

    upper = supap_upper_step(diff, options.tau, options.rho, options.delta, options.offset, options.start)
    rank = 1 + (torch.where(level_j < level_k, upper, exact) * counted).sum(-1)

    hrank_steps = exact
    if options.with_hrank:
        lower = linear_lower_step(diff, options.leak, options.beta, options.gamma)
        hrank_steps = torch.where(level_j > level_k, lower, exact)
    rel_k = rel.gather(1, index)
    weight = torch.minimum(rel_k[:, :, None], rel[:, None, :]) * counted  # rel = 0 at level 0
    hrank = rel_k + (weight * hrank_steps).sum(-1)
    return _hap_ratio(hrank, rank, rel_k, ranked)


def _hap_ratio(hrank: Tensor, rank: Tensor, rel_k: Tensor, ranked: Tensor) -> Tensor:
    """Surrogate H-AP ``[Q]`` from the ``[Q, P]`` H-ranks, ranks and relevances of the ranked items."""
    total_rel = torch.where(ranked, rel_k, torch.zeros_like(rel_k)).sum(-1)
    ratio = torch.where(ranked, hrank / rank, torch.zeros_like(rank)).sum(-1)
    return ratio / torch.where(total_rel > 0, total_rel, torch.ones_like(total_rel))


def hap_surrogate(
    scores: Tensor,
    levels: Tensor,
    num_levels: int,
    valid: Tensor | None = None,
    *,
    alpha: float = 1.0,
    tau: float = 0.01,
    rho: float = 100.0,
    delta: float = 0.05,
    leak: float = 10.0,
    beta: float = 25.0,
    gamma: float = 0.5,
    with_hrank: bool = True,
    chunk_size: int | None = None,
    offset: float | None = None,
    start: float = 0.5,
    engine: str = "auto",
) -> tuple[Tensor, Tensor]:
    """Surrogate H-AP of every query (HAPPIER Eq. 5), differentiable with respect to ``scores``.

    Args:
        scores: ``[Q, N]`` query-item similarities (float32 or float64; the result has the same dtype).
        levels: ``[Q, N]`` integer levels in ``0..num_levels`` (:func:`ranklit.functional.inputs.levels_between`).
        num_levels: ``L``, the number of label columns.
        valid: ``[Q, N]`` bool, ``False`` for items removed from the query's ranking (the query itself); all kept
            when ``None``.
        alpha: relevance exponent of HAPPIER Eq. 4 (1; HAPPIER_F: 5 on SOP, 3 on iNaturalist).
        tau: temperature of the sigmoid of ``H^-`` (0.01).
        rho: slope of ``H^-`` beyond ``delta`` (100).
        delta: where the linear part of ``H^-`` starts (0.05).
        leak: slope of the lower bound ``H_lb`` on negative differences (10).
        beta: slope of ``H_lb`` on positive differences (25).
        gamma: value of ``H_lb`` just after 0, in ``[0, 1]`` (0.5).
        with_hrank: bound ``H-rank`` with ``H_lb`` on items of higher level (the paper); ``False``: the exact,
            gradient-free step there (the authors' configs).
        chunk_size: queries per chunk (``None``: from a memory budget).
        offset: value of ``H^-`` just after ``delta`` (``None``: continuous, the paper; the authors' configs: 1.44).
        start: jump of ``H^-`` on ``(0, delta]`` (0.5).
        engine: ``"auto"``, ``"torch"`` or ``"triton"``: who computes the sums
            (:func:`~ranklit.functional.smooth_rank_engine`); the engines agree to float32 round-off.

    The options are validated by :class:`HAPOptions`.

    Returns:
        ``(hap, has_relevant)``, both ``[Q]``: the surrogate H-AP (0 for a query without relevant item) and whether
        the query has at least one item of level ``>= 1`` in its retrieval set.

    Cost: ``O(Q * P * N)`` time with ``P`` the largest number of relevant items of a query; peak memory
    ``O(chunk * P * N + Q * N)`` (never ``Q * N * N``; Triton engine: ``O(Q * N)``). An exact tie between a relevant
    item and an item of lower level counts 0.5 in the surrogate against 1 in the exact rank: the only case where the
    bound can fail.

    Example:
        >>> scores = torch.tensor([[0.9, 0.5, 0.1]])
        >>> hap, ok = hap_surrogate(scores, torch.tensor([[2, 1, 0]]), num_levels=2)
        >>> round(float(hap), 4), ok.tolist()
        (1.0, [True])
    """
    opts = HAPOptions(
        alpha=alpha, tau=tau, rho=rho, delta=delta, leak=leak, beta=beta, gamma=gamma, with_hrank=with_hrank,
        chunk_size=chunk_size, offset=offset, start=start, engine=engine,
    )
    if not isinstance(levels, Tensor) or levels.is_floating_point() or levels.shape != getattr(scores, "shape", None):
        got = f"{levels.dtype} {tuple(levels.shape)}" if isinstance(levels, Tensor) else type(levels).__name__
        raise ValueError(f"`levels` must be an integer tensor of the scores' shape [Q, N], got {got}.")
    valid = check_score_masks(scores, levels > 0, valid)
    rel = relevance(levels, num_levels, alpha=opts.alpha, valid=valid).to(scores.dtype)
    index, ranked = select_columns((levels > 0) & valid)
    has_relevant = ranked.any(dim=1)
    # about four times as many [chunk, P, N] intermediates as SupAP: size the default chunks accordingly
    size = resolve_chunk_size(opts.chunk_size, scores.shape[0], _INTERMEDIATES * index.shape[1], scores.shape[1])
    if index.shape[1] == 0:
        return scores.new_zeros(scores.shape[0]), has_relevant
    if smooth_rank_engine(scores, opts.engine, num_levels) == "triton":
        codes = torch.where(valid, levels, torch.full_like(levels, -1))
        forced = opts.engine == "triton"
        rank, hrank = checked_rank_sums(scores, codes, rel, index, ranked, opts.steps(), forced=forced)
        return _hap_ratio(hrank, rank, rel.gather(1, index), ranked), has_relevant
    chunk_fn = partial(_hap_per_query, options=opts)
    hap = map_query_chunks(chunk_fn, scores, levels, rel, valid, index, ranked, chunk_size=size)
    return hap, has_relevant


def hap_loss(
    scores: Tensor,
    levels: Tensor,
    num_levels: int,
    valid: Tensor | None = None,
    *,
    alpha: float = 1.0,
    tau: float = 0.01,
    rho: float = 100.0,
    delta: float = 0.05,
    leak: float = 10.0,
    beta: float = 25.0,
    gamma: float = 0.5,
    with_hrank: bool = True,
    chunk_size: int | None = None,
    offset: float | None = None,
    start: float = 0.5,
    engine: str = "auto",
    reducer: str | Reducer = "mean",
    query_classes: Tensor | None = None,
) -> Tensor:
    """H-AP surrogate loss ``mean_q (1 - H-AP^s_q)`` over the queries that have a relevant item.

    Arguments as :func:`hap_surrogate`, plus the ``reducer`` the terms ``1 - H-AP^s_q`` go to (``"mean"``,
    ``"class_balanced"`` with ``query_classes`` the ``[Q]`` finest classes, ``"active"``, ``"none"`` or a
    :class:`~ranklit.functional.Reducer`; ``"mean"`` gives the formula). Raises ``ValueError`` when no
    query has a relevant item (a batch of singletons: sample it with ``ranklit.data.PKSampler``, K >= 2, or the
    hierarchical sampler). With ``H_lb`` the surrogate H-rank can be negative, so the loss may exceed 1 on badly
    ranked batches.

    Example:
        >>> scores = torch.tensor([[0.1, 0.9, 0.5], [0.3, 0.2, 0.8]])
        >>> levels = torch.tensor([[2, 0, 1], [0, 1, 1]])
        >>> round(float(hap_loss(scores, levels, num_levels=2)), 4)
        0.7001
    """
    hap, has_relevant = hap_surrogate(
        scores, levels, num_levels, valid, alpha=alpha, tau=tau, rho=rho, delta=delta, leak=leak, beta=beta,
        gamma=gamma, with_hrank=with_hrank, chunk_size=chunk_size, offset=offset, start=start, engine=engine,
    )
    if not bool(has_relevant.any()):
        raise ValueError(
            "No query has a relevant item (level >= 1: same label at the coarsest column) in its retrieval set, so "
            "the H-AP loss is undefined. Sample batches with several images per class, e.g. "
            "`ranklit.data.PKSampler(labels, p, k)` with k >= 2, or `ranklit.data.HierarchicalSampler`."
        )
    return reduce_ap_loss(hap, has_relevant, reducer, query_classes)
