"""Hierarchical AP losses of HAPPIER (Ramzi et al., ECCV 2022): :class:`HAPLoss` and :class:`HAPPIERLoss`."""

from __future__ import annotations

from dataclasses import asdict

import torch
from torch import Tensor

from ranklit._checks import check_in_range
from ranklit.functional import HAPOptions, hap_loss
from ranklit.functional.inputs import RetrievalInputs, check_hierarchy, levels_between
from ranklit.functional.losses.hyperparameters import check_engine_runs
from ranklit.functional.reducers import Reducer
from ranklit.losses._cluster import ClusterLoss
from ranklit.losses._registry import register_loss
from ranklit.losses.base import RetrievalLoss, checked_reducer

__all__ = ["HAPLoss", "HAPPIERLoss"]


@register_loss(
    summary="smooth upper bound of 1 − H-AP",
    paper="HAPPIER, ECCV 2022",
    examples={"": {}, "without_hrank": {"with_hrank": False}},
)
class HAPLoss(RetrievalLoss):
    """Smooth upper bound of ``1 - H-AP`` (HAPPIER §3.2, Eq. 5); see :func:`ranklit.functional.hap_loss`.

    For each relevant item ``k`` (level ``>= 1``) of each query, ``rank(k)`` uses ROADMAP's upper bound ``H^-`` on the
    items of strictly lower level and ``H-rank(k)`` the lower bound ``H_lb`` on the items of strictly higher level;
    all other steps are exact and carry no gradient. The relevance is HAPPIER Eq. 4 with exponent ``alpha``, counted
    in each query's retrieval set without the query; ``include_self=True`` keeps the query in its own ranking (a
    relevant item of level L at rank 1, counted in ``|Omega^(L)|``), as the authors' released HAPPIER code does. With
    ``[B]`` labels (L = 1) this is exactly :class:`ranklit.losses.SupAPLoss`. Embeddings are L2-normalised first
    unless ``normalize=False``.
    Time ``O(B P N)``, peak memory ``O(chunk P N + B N)`` with ``P`` the largest number of relevant items of a query
    (never ``B x B x B``).

    Args:
        alpha: relevance exponent (1, HAPPIER; HAPPIER_F uses 5 on SOP, 3 on iNaturalist).
        tau: sigmoid temperature of ``H^-`` (0.01).
        rho: slope of ``H^-`` beyond ``delta`` (100).
        delta: where the linear part of ``H^-`` starts (0.05).
        leak: slope of the lower bound ``H_lb`` on negative differences (10).
        beta: slope of ``H_lb`` on positive differences (25).
        gamma: ``H_lb`` just after 0, in ``[0, 1]`` (0.5).
        with_hrank: bound ``H-rank`` with ``H_lb`` as in the paper (default); ``False``: the authors' configs, where
            items of higher level get the exact step and no gradient.
        chunk_size: queries per chunk (``None`` picks it from a memory budget).
        offset: ``H^-`` just after ``delta`` (``None``: continuous, the paper; the released configs: 1.44).
        start: jump of ``H^-`` on ``(0, delta]`` (0.5; the authors' iNaturalist config: 0).
        engine: who computes the smooth-rank sums: ``"auto"`` (default: Triton kernels on CUDA when Triton imports,
            else torch), ``"torch"`` or ``"triton"`` (:func:`ranklit.functional.smooth_rank_engine`).
        reducer: what the per-query terms ``1 - H-AP_q`` go to: ``"mean"`` (default, over the queries with a
            relevant item), ``"class_balanced"`` (by finest class), ``"active"``, ``"none"`` or a
            :class:`~ranklit.functional.Reducer` (:mod:`ranklit.functional.reducers`).
        normalize: L2-normalise the embeddings first (default ``True``; ``False``: raw dot products).
        include_self: keep the query in its own ranking (authors' code; default ``False``, the paper).

    The options are validated by :class:`ranklit.functional.HAPOptions` (kept in ``self.options``).

    **Reproducing the authors' released code** ([spec §6][spec-released-code]; ``elias-ramzi/HAPPIER``, configs
    ``HAPPIER*.yaml``): ``HAPLoss(include_self=True, with_hrank=False, offset=1.44)``, and on iNaturalist
    ``HAPLoss(include_self=True, with_hrank=False, offset=1.0, start=0.0)``; HAPPIER_F adds ``alpha=5`` (SOP) or
    ``alpha=3`` (iNaturalist), and ``HAPPIER_5_SOP.yaml`` keeps the bound (``with_hrank=True``).

    Example:
        >>> import torch
        >>> _ = torch.manual_seed(0)
        >>> emb = torch.randn(8, 4)
        >>> labels = torch.tensor([[0, 0], [0, 0], [1, 0], [1, 0], [2, 1], [2, 1], [3, 1], [3, 1]])
        >>> round(HAPLoss()(emb, labels).item(), 4)
        1.0726
    """

    def __init__(
        self,
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
        normalize: bool = True,
        include_self: bool = False,
    ) -> None:
        super().__init__(normalize=normalize, include_self=include_self)
        self.options = HAPOptions(
            alpha=alpha, tau=tau, rho=rho, delta=delta, leak=leak, beta=beta, gamma=gamma, with_hrank=with_hrank,
            chunk_size=chunk_size, offset=offset, start=start, engine=check_engine_runs(engine),
        )
        self.reducer = checked_reducer(reducer)

    def retrieval_loss(self, scores: Tensor, inputs: RetrievalInputs, valid: Tensor) -> Tensor:
        check_hierarchy(torch.cat([inputs.query_labels, inputs.ref_labels]))
        levels = levels_between(inputs.query_labels, inputs.ref_labels)
        return hap_loss(
            scores, levels, inputs.num_levels, valid, **asdict(self.options), reducer=self.reducer,
            query_classes=inputs.query_labels[:, 0],
        )


@register_loss(summary="H-AP + clustering", paper="HAPPIER, ECCV 2022", proxy=True)
class HAPPIERLoss(HAPLoss):
    """HAPPIER (Ramzi et al., ECCV 2022): ``(1 - lam) L_H-AP + lam L_clust`` with ``lam = 0.1``.

    The H-AP term is :class:`HAPLoss` on the retrieval set (batch, or ``ref_*`` when given); the clustering term is
    :class:`ClusterLoss` on the queries only (proxies of the fine classes, column 0, ids in ``[0, num_classes)``).
    The proxies, ``self.cluster.proxies``, are the module's only parameters: give them their own learning rate and
    schedule (authors: Adam lr 10 with cosine decay on SOP, 2e-5 on iNaturalist). Embeddings are L2-normalised
    first unless ``normalize=False``; ``include_self=True`` keeps the query in the H-AP term's ranking (the authors'
    released code). The H-AP options are :class:`HAPLoss`'s (the released configs: ``with_hrank=False,
    offset=1.44``; iNaturalist ``offset=1.0, start=0.0``). Cost: :class:`HAPLoss` plus ``O(B C D)``.

    Args:
        num_classes: number of fine training classes (proxies); ``None``: set at fit time (see :class:`ClusterLoss`).
        embedding_dim: embedding dimension; ``None``: likewise.
        lam: weight of the clustering loss, in ``[0, 1]`` (0.1; DyML-A uses 0.5).
        temperature: clustering temperature (0.05).
        alpha: relevance exponent (1, HAPPIER; HAPPIER_F uses 5 on SOP, 3 on iNaturalist).
        tau: sigmoid temperature of ``H^-`` (0.01).
        rho: slope of ``H^-`` beyond ``delta`` (100).
        delta: where the linear part of ``H^-`` starts (0.05).
        leak: slope of the lower bound ``H_lb`` on negative differences (10).
        beta: slope of ``H_lb`` on positive differences (25).
        gamma: ``H_lb`` just after 0, in ``[0, 1]`` (0.5).
        with_hrank: bound ``H-rank`` with ``H_lb`` as in the paper (default); ``False``: the authors' configs, where
            items of higher level get the exact step and no gradient.
        chunk_size: queries per chunk (``None`` picks it from a memory budget).
        offset: ``H^-`` just after ``delta`` (``None``: continuous, the paper; the released configs: 1.44).
        start: jump of ``H^-`` on ``(0, delta]`` (0.5; the authors' iNaturalist config: 0).
        engine: who computes the smooth-rank sums: ``"auto"`` (default: Triton kernels on CUDA when Triton imports,
            else torch), ``"torch"`` or ``"triton"`` (:func:`ranklit.functional.smooth_rank_engine`).
        reducer: the reducer of both terms (each reduced, then weighted; the clustering term counts every query):
            ``"mean"`` (default), ``"class_balanced"``, ``"active"``, ``"none"`` (``[B]``) or a
            :class:`~ranklit.functional.Reducer`.
        normalize: L2-normalise the embeddings first (default ``True``).
        include_self: keep the query in the H-AP term's ranking (authors' code; default ``False``).

    Example:
        >>> import torch
        >>> _ = torch.manual_seed(0)
        >>> loss = HAPPIERLoss(num_classes=4, embedding_dim=4)
        >>> labels = torch.tensor([[0, 0], [0, 0], [1, 0], [1, 0], [2, 1], [2, 1], [3, 1], [3, 1]])
        >>> round(loss(torch.randn(8, 4), labels).item(), 4)
        2.5737
    """

    def __init__(
        self,
        num_classes: int | None = None,
        embedding_dim: int | None = None,
        lam: float = 0.1,
        temperature: float = 0.05,
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
        normalize: bool = True,
        include_self: bool = False,
    ) -> None:
        super().__init__(
            alpha=alpha, tau=tau, rho=rho, delta=delta, leak=leak, beta=beta, gamma=gamma, with_hrank=with_hrank,
            chunk_size=chunk_size, offset=offset, start=start, engine=engine, reducer=reducer, normalize=normalize,
            include_self=include_self,
        )
        self.lam = check_in_range("lam", lam, 0.0, 1.0)
        self.cluster = ClusterLoss(num_classes, embedding_dim, temperature=temperature)

    def retrieval_loss(self, scores: Tensor, inputs: RetrievalInputs, valid: Tensor) -> Tensor:
        hap = super().retrieval_loss(scores, inputs, valid)
        cluster = self.cluster.proxy_loss(inputs.queries, inputs.query_labels, reducer=self.reducer)
        return (1.0 - self.lam) * hap + self.lam * cluster
