"""Float64 loop oracles of the papers' released code, written from reading it (never copied), for the switches of
docs/spec.md §6. Each function names the file and commit it follows.

Nothing here imports ranklit. Embeddings are L2-normalised first; scores are cosines.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

ROADMAP_COMMIT = "fed37d75f475f636542b2ccd1ffc0c3918498a57"  # elias-ramzi/ROADMAP
HAPPIER_COMMIT = "5af91b3ac6c216a936232da33b42af7efaba5c6b"  # elias-ramzi/HAPPIER
FASTAP_COMMIT = "ca85b2ab3f22460795d4306c8fa01c655d17027e"  # kunhe/FastAP-metric-learning


def _unit(e: Tensor) -> Tensor:
    e = e.double()
    return e / e.norm(dim=1, keepdim=True)


def _sigmoid(x: Tensor, tau: float) -> Tensor:
    return 1.0 / (1.0 + torch.exp((-x / tau).clamp(-50, 50)))


def released_step(t: Tensor, tau: float, rho: float, delta: float, offset: float | None, start: float) -> Tensor:
    """``step_rank`` on a negative (ROADMAP ``roadmap/losses/smooth_rank_ap.py``; HAPPIER ``happier/losses/hap_loss.py``
    on an item of lower relevance): sigmoid for ``t <= 0``, ``start + sigmoid`` on ``(0, delta]``, ``rho (t - delta) +
    offset`` beyond, ``offset`` defaulting to ``sigmoid(delta / tau) + start``."""
    if offset is None:
        offset = float(_sigmoid(torch.tensor(delta, dtype=torch.float64), tau)) + start
    if t <= 0:
        return _sigmoid(t, tau)
    if t <= delta:
        return start + _sigmoid(t, tau)
    return rho * (t - delta) + offset


def _heaviside(t: Tensor) -> Tensor:
    """``torch.heaviside(t, values=1)``: 1 at 0."""
    return (t >= 0).double()


def roadmap_supap(emb: Tensor, labels: Tensor, *, tau: float = 0.01, rho: float = 100.0, delta: float = 0.05,
                  offset: float | None = 1.44, start: float = 0.5) -> Tensor:
    """ROADMAP's ``SupAP.quick_forward`` (``roadmap/losses/smooth_rank_ap.py``): the whole batch ranked for every query,
    the query included (a positive of itself); for a positive ``k``, ``rank = 1 + sum_{j != k} step`` with the exact
    step (1 at 0) on positives and ``step_rank`` on negatives; ``rank+ = 1 + sum_{j != k, positive}``. Loss
    ``1 - mean_q AP_q``."""
    e = _unit(emb)
    s = e @ e.T
    n = len(labels)
    aps = []
    for q in range(n):
        positives = [k for k in range(n) if labels[k] == labels[q]]
        total = torch.zeros((), dtype=torch.float64)
        for k in positives:
            rank = torch.ones((), dtype=torch.float64)
            rank_pos = torch.ones((), dtype=torch.float64)
            for j in range(n):
                if j == k:
                    continue
                t = s[q, j] - s[q, k]
                if labels[j] == labels[q]:
                    rank = rank + _heaviside(t)
                    rank_pos = rank_pos + _heaviside(t)
                else:
                    rank = rank + released_step(t, tau, rho, delta, offset, start)
            total = total + rank_pos / rank
        aps.append(total / len(positives))
    return 1.0 - torch.stack(aps).mean()


def pml_calibration(emb: Tensor, labels: Tensor, alpha: float = 0.9, beta: float = 0.6) -> Tensor:
    """ROADMAP's ``CalibrationLoss`` (``roadmap/losses/calibration_loss.py``): pytorch-metric-learning's
    ``ContrastiveLoss(pos_margin=alpha, neg_margin=beta)`` on dot products of all ordered pairs ``i != j`` with its
    ``AvgNonZeroReducer``: each of the positive and negative terms averaged over its non-zero pair losses, a term
    with no pair (or no non-zero loss) being 0, then added."""
    e = _unit(emb)
    pos_terms, neg_terms = [], []
    for i in range(len(labels)):
        for j in range(len(labels)):
            if i != j:
                s = e[i] @ e[j]
                if labels[i] == labels[j]:
                    pos_terms.append(torch.clamp(alpha - s, min=0))
                else:
                    neg_terms.append(torch.clamp(s - beta, min=0))

    def avg_non_zero(terms: list[Tensor]) -> Tensor:
        active = [t for t in terms if float(t.detach()) > 0]
        return torch.stack(active).mean() if active else torch.zeros((), dtype=torch.float64)

    return avg_non_zero(pos_terms) + avg_non_zero(neg_terms)


def roadmap_total(emb: Tensor, labels: Tensor, offset: float | None = 1.44, start: float = 0.5) -> Tensor:
    """``roadmap/engine/base_update.py``: the sum of ``weight * loss`` over the config's criteria; ``roadmap.yaml``
    and ``roadmap_inat.yaml`` weight ``CalibrationLoss`` and ``SupAP`` 1.0 each."""
    return 1.0 * pml_calibration(emb, labels) + 1.0 * roadmap_supap(emb, labels, offset=offset, start=start)


def _released_lower_bound(t: Tensor, beta: float, leak: float, gamma: float) -> Tensor:
    """``step_hrank`` on an item of higher relevance (``happier/losses/hap_loss.py``): ``leak * t`` where ``t <= 0``,
    ``min(beta * t + gamma, 1)`` where ``t > 0``."""
    return leak * t if t <= 0 else torch.clamp(beta * t + gamma, max=1.0)


def happier_relevance(level: list[int], num_levels: int, alpha: float) -> list[float]:
    """``get_relevances_pop`` (``happier/engine/compute_relevance_on_the_fly.py``) then ``create_relevance_matrix``:
    the datasets' ``relevance_type: pop``, ``check_for = range(HIERARCHY_LEVEL + 1)``, so ``levels = L``; an item of
    level ``l`` weighs ``(l / (L - 1))^alpha`` divided by the number of items of level ``l`` in the query's row (the
    query itself included, at level ``L``). ``alpha`` is the dataset's ``alpha`` (``alpha_train`` in training):
    1 in every shipped config; HAPPIER_F sets it to 5 (SOP) or 3 (iNaturalist). The released weight
    ``(l / (L - 1))^alpha`` is Eq. 4's ``(l / L)^alpha`` times a constant, which H-AP does not see."""
    sizes = {v: level.count(v) for v in range(num_levels + 1)}
    return [((v / (num_levels - 1)) ** alpha) / sizes[v] if v > 0 else 0.0 for v in level]


def happier_hap(emb: Tensor, labels: Tensor, *, alpha: float = 1.0, tau: float = 0.01, rho: float = 100.0,
                delta: float = 0.05, offset: float | None = 1.44, start: float = 0.5, with_hrank: bool = False,
                beta: float = 25.0, leak: float = 10.0, gamma: float = 0.5) -> Tensor:
    """HAPPIER's ``HAPLoss.quick_forward`` (``happier/losses/hap_loss.py``): every batch item ranked for every query,
    the query included; the level of ``j`` for ``q`` is the number of label columns they share
    (``lib.create_label_matrix``); for item ``k``, ``rank = 1 + sum_{j != k}`` of ``step_rank`` on items of strictly
    lower level and the exact step elsewhere; ``H-rank = rel(k) + sum_{j != k} min(rel(k), rel(j)) step(s_j - s_k)``
    with the exact step, or with ``with_hrank`` (``HAPPIER_5_SOP.yaml``) ``step_hrank`` on items of strictly higher
    level; ``H-AP = sum_k H-rank / rank / sum_k rel``, relevance :func:`happier_relevance`. Loss
    ``1 - mean_q H-AP_q``."""
    e = _unit(emb)
    s = e @ e.T
    n, num_levels = labels.shape
    level = (labels[:, None, :] == labels[None, :, :]).sum(-1)
    values = []
    for q in range(n):
        rel = happier_relevance([int(v) for v in level[q]], num_levels, alpha)
        total = torch.zeros((), dtype=torch.float64)
        for k in range(n):
            if rel[k] == 0.0:
                continue
            rank = torch.ones((), dtype=torch.float64)
            h_rank = torch.tensor(rel[k], dtype=torch.float64)
            for j in range(n):
                if j == k:
                    continue
                t = s[q, j] - s[q, k]
                lower = level[q, j] < level[q, k]
                rank = rank + (released_step(t, tau, rho, delta, offset, start) if lower else _heaviside(t))
                higher = level[q, j] > level[q, k]
                step = _released_lower_bound(t, beta, leak, gamma) if with_hrank and higher else _heaviside(t)
                h_rank = h_rank + min(rel[k], rel[j]) * step
            total = total + h_rank / rank
        values.append(total / sum(rel))
    return 1.0 - torch.stack(values).mean()


def happier_cluster(emb: Tensor, labels: Tensor, proxies: Tensor, temperature: float = 0.05) -> Tensor:
    """``ClusterLoss.forward`` (``happier/losses/cluster_loss.py``, ``hierarchy_level: 0``): the mean over the batch of
    the cross-entropy of ``<e, w_c / |w_c|> / temperature`` against the fine label, ``e`` the network's normalised
    embedding."""
    e = _unit(emb)
    w = proxies.double() / proxies.double().norm(dim=1, keepdim=True)
    terms = []
    for i in range(e.shape[0]):
        logits = [(e[i] @ w[c]) / temperature for c in range(w.shape[0])]
        top = max(float(x.detach()) for x in logits)
        log_sum = top + torch.log(sum(torch.exp(x - top) for x in logits))
        terms.append(log_sum - logits[int(labels[i, 0])])
    return torch.stack(terms).mean()


def happier_total(emb: Tensor, labels: Tensor, proxies: Tensor, weights: tuple[float, float] = (0.9, 0.1),
                  **hap_options: float) -> Tensor:
    """``_calculate_loss_and_backward`` (``happier/engine/base_training_loop.py``): ``sum weight * loss.mean()`` over
    the config's criteria; ``HAPPIER.yaml`` weighs ``HAPLoss`` 0.9 and ``ClusterLoss`` 0.1 (``HAPPIER_SOP.yaml`` and
    ``HAPPIER_inat.yaml``: ``1 - 0.1``; ``HAPPIER_5.yaml``, DyML-A: 0.5 and 0.5)."""
    return weights[0] * happier_hap(emb, labels, **hap_options) + weights[1] * happier_cluster(emb, labels, proxies)


def fastap(emb: Tensor, labels: Tensor, num_bins: int = 10) -> Tensor:
    """``pytorch/FastAP_loss.py`` forward: affinity with the diagonal set to 0 (the query left out), squared distances
    ``2 - 2 s``, ``num_bins + 1`` triangular bins of width ``4 / num_bins`` over ``[0, 4]``, ``FastAP = sum_l h+_l
    H+_l / H_l / N+`` (NaN/inf terms 0, queries without positive dropped), loss ``1 - mean FastAP``."""
    e = _unit(emb)
    dist = 2 - 2 * (e @ e.T)
    width = 4.0 / num_bins
    centres = [4.0 * i / num_bins for i in range(num_bins + 1)]
    values = []
    for q in range(len(labels)):
        pos = [j for j in range(len(labels)) if j != q and labels[j] == labels[q]]
        neg = [j for j in range(len(labels)) if labels[j] != labels[q]]
        if not pos:
            continue
        h_pos = [sum(torch.clamp(1 - (dist[q, j] - c).abs() / width, min=0) for j in pos) for c in centres]
        h_neg = [sum(torch.clamp(1 - (dist[q, j] - c).abs() / width, min=0) for j in neg) for c in centres]
        cum_pos = cum_all = torch.zeros((), dtype=torch.float64)
        value = torch.zeros((), dtype=torch.float64)
        for hp, hn in zip(h_pos, h_neg, strict=True):
            cum_pos, cum_all = cum_pos + hp, cum_all + hp + hn
            term = hp * cum_pos / cum_all
            value = value + (term if math.isfinite(float(term.detach())) else 0.0)
        values.append(value / len(pos))
    return 1.0 - torch.stack(values).mean()


SMOOTH_AP_COMMIT = "59927ec4c59565bff209301d2c2b449ed1937806"  # Andrew-Brown1/Smooth_AP


def brown_smooth_ap(emb: Tensor, labels: Tensor, tau: float = 0.01) -> Tensor:
    """Brown et al.'s ``SmoothAP.forward`` (``src/Smooth_AP_loss.py``): every batch item ranked for every query, the
    query included; ``rank(k) = 1 + sum_{j != k} sigmoid((s_j - s_k) / tau)`` (exponent clamped to 50),
    ``rank+(k)`` the same over the query's class; AP averages ``rank+ / rank`` over the class (query included); loss
    ``1 - mean AP``. (The released code takes P x K batches ordered by class and unnormalised inputs; the loop below
    is the same sum for any batch, on normalised embeddings.)"""
    e = _unit(emb)
    s = e @ e.T
    n = len(labels)
    aps = []
    for q in range(n):
        positives = [k for k in range(n) if labels[k] == labels[q]]
        total = torch.zeros((), dtype=torch.float64)
        for k in positives:
            rank = 1 + sum(_sigmoid(s[q, j] - s[q, k], tau) for j in range(n) if j != k)
            rank_pos = 1 + sum(_sigmoid(s[q, j] - s[q, k], tau) for j in positives if j != k)
            total = total + rank_pos / rank
        aps.append(total / len(positives))
    return 1.0 - torch.stack(aps).mean()
