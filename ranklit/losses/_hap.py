"""Hierarchical AP losses of HAPPIER (Ramzi et al., ECCV 2022): :class:`HAPLoss` and :class:`HAPPIERLoss`."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

import torch
from torch import Tensor

from ranklit.functional._hap import HAPOptions, hap_loss
from ranklit.functional.inputs import RetrievalInputs, check_hierarchy, levels_between
from ranklit.functional.loss_utils import check_in_range
from ranklit.losses._cluster import ClusterLoss
from ranklit.losses.base import RetrievalLoss

__all__ = ["HAPLoss", "HAPPIERLoss"]


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
        normalize: L2-normalise the embeddings first (default ``True``; ``False``: raw dot products).
        include_self: keep the query in its own ranking (authors' code; default ``False``, the paper).
        **options: the surrogate's keyword options, defined and validated by :class:`ranklit.functional.HAPOptions`:
            ``alpha`` (relevance exponent: 1, HAPPIER; HAPPIER_F uses 5 on SOP, 3 on iNaturalist); ``tau``,
            ``rho``, ``delta`` (``H^-``: 0.01, 100, 0.05); ``leak``, ``beta``, ``gamma`` (``H_lb``: 10, 25, 0.5);
            ``with_hrank`` (bound ``H-rank`` with ``H_lb`` as in the paper, the default; ``False``: the authors'
            configs, where items of higher level get the exact step and no gradient); ``chunk_size`` (queries per
            chunk; ``None`` picks it from a memory budget); ``offset``, ``start`` (the jump of ``H^-`` after
            ``delta`` and on ``(0, delta]``; ``None`` and 0.5: the paper).

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

    def __init__(self, *, normalize: bool = True, include_self: bool = False, **options: Any) -> None:
        super().__init__(normalize=normalize, include_self=include_self)
        self.options = HAPOptions(**options)

    def retrieval_loss(self, scores: Tensor, inputs: RetrievalInputs, valid: Tensor) -> Tensor:
        check_hierarchy(torch.cat([inputs.query_labels, inputs.ref_labels]))
        levels = levels_between(inputs.query_labels, inputs.ref_labels)
        return hap_loss(scores, levels, inputs.num_levels, valid, **asdict(self.options))

    def extra_repr(self) -> str:
        options = ", ".join(f"{field.name}={getattr(self.options, field.name)}" for field in fields(self.options))
        return f"{options}, normalize={self.normalize}, include_self={self.include_self}"


class HAPPIERLoss(HAPLoss):
    """HAPPIER (Ramzi et al., ECCV 2022): ``(1 - lam) L_H-AP + lam L_clust`` with ``lam = 0.1``.

    The H-AP term is :class:`HAPLoss` on the retrieval set (batch, or ``ref_*`` when given); the clustering term is
    :class:`ClusterLoss` on the queries only (proxies of the fine classes, column 0, ids in ``[0, num_classes)``).
    The proxies, ``self.cluster.proxies``, are the module's only parameters: give them their own learning rate and
    schedule (authors: Adam lr 10 with cosine decay on SOP, 2e-5 on iNaturalist). Embeddings are L2-normalised
    first unless ``normalize=False``; ``include_self=True`` keeps the query in the H-AP term's ranking (the authors'
    released code). Cost: :class:`HAPLoss` plus ``O(B C D)``.

    Args:
        num_classes: number of fine training classes (proxies); ``None``: set at fit time (see :class:`ClusterLoss`).
        embedding_dim: embedding dimension; ``None``: likewise.
        lam: weight of the clustering loss, in ``[0, 1]`` (0.1; DyML-A uses 0.5).
        temperature: clustering temperature (0.05).
        **options: :class:`HAPLoss` arguments: ``normalize`` (default ``True``), ``include_self`` (keep the query in
            the H-AP term's ranking; default ``False``) and the H-AP options of
            :class:`ranklit.functional.HAPOptions` (the released configs: ``with_hrank=False, offset=1.44``;
            iNaturalist ``offset=1.0, start=0.0``).

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
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.lam = check_in_range("lam", lam, 0.0, 1.0)
        self.cluster = ClusterLoss(num_classes, embedding_dim, temperature=temperature)

    def retrieval_loss(self, scores: Tensor, inputs: RetrievalInputs, valid: Tensor) -> Tensor:
        hap = super().retrieval_loss(scores, inputs, valid)
        return (1.0 - self.lam) * hap + self.lam * self.cluster.proxy_loss(inputs.queries, inputs.query_labels)

    def extra_repr(self) -> str:
        return f"lam={self.lam}, {super().extra_repr()}"
