"""Proxy-based losses of the HAPPIER tables: the clustering loss (HAPPIER Eq. 6) and CSL (Sun et al., CVPR 2021).

Both hold one learnable proxy per fine training class; proxies are L2-normalised before use, embeddings are assumed
L2-normalised already (the model does it), so ``<v, p / |p|>`` is a cosine similarity.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from ranklit._checks import check_positive
from ranklit.functional.losses.hyperparameters import check_class_ids
from ranklit.functional.reducers import Reducer, get_reducer

__all__ = ["cluster_loss", "csl_loss"]




def cluster_loss(
    embeddings: Tensor,
    class_ids: Tensor,
    proxies: Tensor,
    temperature: float = 0.05,
    *,
    reducer: str | Reducer = "mean",
) -> Tensor:
    """Clustering loss of HAPPIER (Ramzi et al., ECCV 2022, Eq. 6): a softmax cross-entropy over normalised proxies::

        L = mean_i -log( exp(<v_i, p_{y_i}> / sigma) / sum_z exp(<v_i, p_z> / sigma) ),   p_z = proxy_z / |proxy_z|

    Args:
        embeddings: ``[B, D]`` L2-normalised embeddings.
        class_ids: ``[B]`` fine class ids in ``[0, C)``.
        proxies: ``[C, D]`` unnormalised proxies (one per fine class).
        temperature: ``sigma`` (HAPPIER: 0.05).
        reducer: what the per-embedding cross-entropies go to (:mod:`ranklit.functional.reducers`; ``"mean"``: the
            formula, ``"class_balanced"``: by ``class_ids``, ``"none"``: the ``[B]`` vector).

    Returns:
        Scalar loss (``[B]`` with ``reducer="none"``). Cost: ``O(B C D)`` time, ``O(B C)`` memory.

    Example:
        >>> proxies = torch.eye(2)
        >>> round(cluster_loss(torch.eye(2), torch.tensor([0, 1]), proxies, temperature=1.0).item(), 4)
        0.3133
    """
    check_positive("temperature", temperature)
    check_class_ids(class_ids, proxies.shape[0])
    logits = embeddings @ F.normalize(proxies.to(embeddings.dtype), dim=1).T / temperature
    terms = F.cross_entropy(logits, class_ids, reduction="none")
    return get_reducer(reducer)(terms, torch.ones_like(class_ids, dtype=torch.bool), class_ids)


def csl_loss(
    embeddings: Tensor,
    labels: Tensor,
    proxies: Tensor,
    class_labels: Tensor,
    margins: Sequence[float] = (0.25, 0.35, 0.45),
    scale: float = 32.0,
) -> Tensor:
    """Cross-Scale Learning loss (Sun et al., "Dynamic Metric Learning", CVPR 2021), a HAPPIER baseline.

    With ``s_z`` the cosine similarity of embedding ``v_i`` to the normalised proxy of fine class ``z`` and ``y_i`` its
    fine class, each level (column) ``h`` adds a margin softmax that pushes every proxy of a **different class at
    column h** below the sample's own fine proxy by ``m_h``::

        L = sum_h mean_i log(1 + sum_{z: c_h(z) != c_h(y_i)} exp(scale * (s_z - s_{y_i} + m_h)))

    Coarser levels have fewer negatives and larger margins (0.25 / 0.35 / 0.45 on DyML's three levels).

    Args:
        embeddings: ``[B, D]`` L2-normalised embeddings.
        labels: ``[B, L]`` labels, column 0 the fine class id in ``[0, C)``.
        proxies: ``[C, D]`` unnormalised fine-class proxies.
        class_labels: ``[C, L]`` labels of each proxy's class at every column; ``-1`` where unknown (a proxy with an
            unknown label at column h is not used as a negative at that level).
        margins: one margin per label column.
        scale: logit scale (32).

    Returns:
        Scalar loss. Cost: ``O(B C (D + L))`` time, ``O(B C)`` memory.

    Example:
        >>> v = torch.eye(2)
        >>> labels = torch.tensor([[0, 0], [1, 0]])
        >>> loss = csl_loss(v, labels, proxies=torch.eye(2), class_labels=labels, margins=(0.25, 0.35))
        >>> round(loss.item(), 6)  # each sample is 1.0 above the other proxy: log(1 + exp(32 * (0.25 - 1)))
        0.0
    """
    check_positive("scale", scale)
    if labels.ndim != 2 or labels.shape[1] != len(margins) or class_labels.shape != (proxies.shape[0], len(margins)):
        raise ValueError(
            f"CSL needs one margin per label column: got {len(margins)} margins, labels of shape "
            f"{tuple(labels.shape)} and class_labels of shape {tuple(class_labels.shape)}. Pass `margins` with one "
            "value per level, finest first."
        )
    check_class_ids(labels[:, 0], proxies.shape[0])
    sims = embeddings @ F.normalize(proxies.to(embeddings.dtype), dim=1).T
    own = sims.gather(1, labels[:, :1])
    zero = sims.new_zeros(sims.shape[0], 1)
    total = sims.new_zeros(())
    for h, margin in enumerate(margins):
        negatives = (class_labels[:, h] >= 0)[None, :] & (class_labels[:, h][None, :] != labels[:, h : h + 1])
        logits = scale * (sims - own + margin)
        logits = torch.where(negatives, logits, torch.full_like(logits, -torch.inf))
        total = total + torch.logsumexp(torch.cat([zero, logits], dim=1), dim=1).mean()
    return total
