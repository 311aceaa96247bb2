"""Triplet loss with semi-hard or distance-weighted negative mining, on cosine scores of L2-normalised embeddings.

Distances are Euclidean between unit vectors, ``d = sqrt(2 - 2s)`` (clamped at ``1e-12`` under the root so the
gradient stays finite for duplicates). Every (anchor, positive) pair of a query's retrieval set gets one negative:

- ``semihard`` (Schroff et al., FaceNet, CVPR 2015; the TensorFlow ``triplet_semihard_loss`` rule): the closest
  negative farther than the positive (``d_an > d_ap``); if there is none, the farthest negative.
- ``distance_weighted`` (Wu et al., "Sampling matters in deep embedding learning", ICCV 2017): a negative drawn with
  probability ``prop. to 1 / q(d)``, ``q(d) prop. to d^(D-2) (1 - d^2/4)^((D-3)/2)`` the density of distances between
  random points of the unit sphere in ``D`` dimensions, with ``d`` clamped to ``[cutoff, 1.99]``
  (uses torch's global random generator).

``L = mean_{(a, p)} [d_ap - d_an + margin]_+`` over the pairs that have a negative. Semi-hard mining builds a
``[chunk, P, N]`` mask (chunked, peak memory ``O(chunk P N + Q N)``, time ``O(Q P N)``); distance-weighted mining is
``O(Q N)``.
"""

from __future__ import annotations

from functools import partial

import torch
from torch import Tensor

from ranklit._checks import check_positive
from ranklit.functional.losses.contract import (
    check_score_masks,
    require_positive_queries,
    resolve_chunk_size,
)
from ranklit.functional.losses.hyperparameters import check_mining
from ranklit.functional.ranking import map_query_chunks, select_columns

__all__ = ["triplet_loss"]

def triplet_loss(
    scores: Tensor,
    positives: Tensor,
    valid: Tensor | None = None,
    *,
    margin: float = 0.2,
    mining: str = "semihard",
    dim: int | None = None,
    cutoff: float = 0.5,
    chunk_size: int | None = None,
) -> Tensor:
    """Triplet loss ``mean_{(a,p)} [d_ap - d_an + margin]_+`` with one mined negative per (anchor, positive) pair.

    Args:
        scores: ``[Q, N]`` cosine similarities (queries are the anchors).
        positives: ``[Q, N]`` bool positives mask.
        valid: ``[Q, N]`` bool mask of each query's retrieval set (``None`` = all).
        margin: triplet margin (0.2).
        mining: ``"semihard"`` (default) or ``"distance_weighted"``.
        dim: embedding dimension ``D``, required by ``"distance_weighted"``.
        cutoff: smallest distance used in the distance-weighted sampling weights (0.5).
        chunk_size: queries per chunk for semi-hard mining (default from the memory budget).

    Returns:
        Scalar loss (0 when no (anchor, positive) pair has a negative).

    Example:
        >>> s = torch.tensor([[0.9, 0.5, -0.2]])
        >>> round(triplet_loss(s, torch.tensor([[True, False, False]])).item(), 4)
        0.0
    """
    margin, cutoff, mining = check_positive("margin", margin), check_positive("cutoff", cutoff), check_mining(mining)
    valid = check_score_masks(scores, positives, valid)
    positives = positives & valid
    negatives = valid & ~positives
    require_positive_queries(positives)
    index, pairs = select_columns(positives)
    pairs = pairs & negatives.any(dim=1, keepdim=True)
    distances = (2.0 - 2.0 * scores).clamp(min=1e-12).sqrt()
    if mining == "semihard":
        size = resolve_chunk_size(chunk_size, scores.shape[0], index.shape[1], scores.shape[1])
        hinge = map_query_chunks(
            partial(_semihard_chunk, margin=margin), distances, negatives, index, pairs, chunk_size=size
        )
    else:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 4:
            raise ValueError(
                f"`dim` (the embedding dimension, >= 4) is required by distance-weighted mining, got {dim!r}."
            )
        chosen = _distance_weighted_negatives(distances.detach(), negatives, index.shape[1], dim, cutoff)
        hinge = _hinge_sum(distances, index, chosen, pairs, margin)
    return hinge.sum() / pairs.sum().clamp(min=1)


def _hinge_sum(distances: Tensor, index: Tensor, chosen: Tensor, pairs: Tensor, margin: float) -> Tensor:
    """Per-query sum of ``[d_ap - d_an + margin]_+`` over the real pairs."""
    hinge = (distances.gather(1, index) - distances.gather(1, chosen) + margin).clamp(min=0)
    return torch.where(pairs, hinge, torch.zeros_like(hinge)).sum(dim=1)


def _semihard_chunk(distances: Tensor, negatives: Tensor, index: Tensor, pairs: Tensor, *, margin: float) -> Tensor:
    d_ap = distances.gather(1, index)[:, :, None]  # [c, P, 1]
    d_all = distances.detach()[:, None, :].expand(-1, index.shape[1], -1)  # [c, P, N]
    farther = negatives[:, None, :] & (d_all > d_ap.detach())
    closest_farther = torch.where(farther, d_all, torch.full_like(d_all, torch.inf)).argmin(dim=-1)
    farthest = torch.where(negatives[:, None, :], d_all, torch.full_like(d_all, -torch.inf)).argmax(dim=-1)
    chosen = torch.where(farther.any(dim=-1), closest_farther, farthest)
    return _hinge_sum(distances, index, chosen, pairs, margin)


def _distance_weighted_negatives(
    distances: Tensor, negatives: Tensor, num_draws: int, dim: int, cutoff: float
) -> Tensor:
    """``[Q, num_draws]`` negatives drawn with probability ``prop. to 1 / q(d)`` (Wu et al. 2017)."""
    d = distances.clamp(min=cutoff, max=1.99)
    log_inverse = -((dim - 2.0) * d.log() + (dim - 3.0) / 2.0 * (1.0 - d.square() / 4.0).log())
    log_inverse = torch.where(negatives, log_inverse, torch.full_like(log_inverse, -torch.inf))
    has_negative = negatives.any(dim=1, keepdim=True)
    log_inverse = torch.where(has_negative, log_inverse, torch.zeros_like(log_inverse))
    weights = (log_inverse - log_inverse.amax(dim=1, keepdim=True)).exp()
    return torch.multinomial(weights, max(num_draws, 1), replacement=True)[:, :num_draws]
