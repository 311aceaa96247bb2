"""Hierarchical relevance of an item for a query (HAPPIER, Ramzi et al. 2022, Eq. 4).

.. math::

    rel(k) = \\frac{(l / L)^\\alpha}{|\\Omega^{(l)}|}

for ``k`` at level ``l >= 1`` (``0`` at level 0), where ``|Omega^(l)|`` is the number of items of level ``l`` in the
query's retrieval set, the query itself excluded. With ``L = 1`` every positive has relevance ``1 / R`` and H-AP is AP.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["HIERARCHICAL_METRICS", "relevance"]

HIERARCHICAL_METRICS: tuple[tuple[str, str, str], ...] = (
    (
        "hap", "H-AP (HAPPIER Eq. 3)",
        r"$\frac{1}{\sum_{k\in\Omega^+}\text{rel}(k)}\sum_{k\in\Omega^+}"
        r"\frac{\mathcal{H}\text{-rank}(k)}{\text{rank}(k)}$, $\mathcal{H}\text{-rank}(k) = \text{rel}(k) + "
        r"\sum_{j\in\Omega^+, j\ne k}\min(\text{rel}(k), \text{rel}(j))\,H(s_j - s_k)$, with the relevance of "
        r"HAPPIER Eq. 4: $\text{rel}(k) = (l/L)^\alpha / \lvert\Omega^{(l)}\rvert$ for "
        r"$k$ of level $l \ge 1$, 0 for level 0, $\Omega^{(l)}$ counted in the query's retrieval set (query excluded); "
        r"$\alpha = 1$ by default. H-AP = AP when $L = 1$",
    ),
    (
        "ndcg", "NDCG",
        r"gain $2^{\text{level}} - 1$, discount $1/\log_2(1 + \text{rank})$, IDCG from the ideal ordering of the same "
        "retrieval set, full list (HAPPIER's evaluation)",
    ),
    (
        "asi", "ASI",
        r"$\frac{1}{R}\sum_{k=1}^{R}\frac{1}{k}\sum_{v=1}^{L}\min(\#\{\text{level } v \text{ in top-}k\}, "
        r"\#\{\text{level } v \text{ in ideal top-}k\})$, $R$ = items of level $\ge 1$; for $L = 1$ the mean of P@k "
        r"for $k \le R$",
    ),
)
"""The metrics of hierarchical labels, declared once: ``(key, title, definition)`` (what the documentation's tables
show; the values are computed together by ``ranklit.functional.metrics._hierarchical``)."""


def relevance(levels: Tensor, num_levels: int, alpha: float = 1.0, valid: Tensor | None = None) -> Tensor:
    """Relevance of every (query, item) pair.

    Args:
        levels: ``[Q, N]`` integer levels in ``0..num_levels`` (see :func:`ranklit.functional.inputs.levels_between`).
        num_levels: ``L``, the number of label columns.
        alpha: exponent of the level term (HAPPIER: 1; HAPPIER_F: 5 on SOP, 3 on iNaturalist).
        valid: ``[Q, N]`` boolean mask of the items in each query's retrieval set (``None`` = all). Items outside it
            get relevance 0 and are not counted in ``|Omega^(l)|``.

    Returns:
        ``[Q, N]`` float64 relevances. Cost: ``O(Q * N * L)`` time, ``O(Q * N)`` memory.

    Example:
        >>> relevance(torch.tensor([[2, 1, 1, 0]]), num_levels=2).tolist()
        [[1.0, 0.25, 0.25, 0.0]]
    """
    if num_levels < 1:
        raise ValueError(f"`num_levels` must be >= 1, got {num_levels}.")
    if alpha < 0:
        raise ValueError(f"`alpha` must be >= 0, got {alpha}.")
    if valid is None:
        valid = torch.ones_like(levels, dtype=torch.bool)
    level_sizes = torch.zeros(levels.shape[0], num_levels + 1, dtype=torch.float64, device=levels.device)
    level_sizes.scatter_add_(1, levels, valid.to(torch.float64))
    size_of_own_level = level_sizes.gather(1, levels).clamp(min=1.0)
    weight = (levels.to(torch.float64) / num_levels) ** alpha
    return torch.where(valid & (levels > 0), weight / size_of_own_level, torch.zeros_like(weight))
