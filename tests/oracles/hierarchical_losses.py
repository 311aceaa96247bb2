"""Float64 brute-force references for the hierarchical losses (docs/spec.md §0–2), written with Python loops.

Nothing here imports ranklit: every step function, level, relevance and rank is re-derived from docs/spec.md: the tests
compare two independent implementations. Scores are torch scalars so autograd gives the reference gradients.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Steps:
    """Hyper-parameters of the H-AP surrogate (docs/spec.md §2 defaults)."""

    tau: float = 0.01
    rho: float = 100.0
    delta: float = 0.05
    leak: float = 10.0
    beta: float = 25.0
    gamma: float = 0.5


def unit(x: Tensor) -> Tensor:
    """Rows divided by their Euclidean norm, in float64 (differentiable)."""
    x = x.double()
    return x / torch.sqrt((x * x).sum(dim=1, keepdim=True))


def heaviside(x: Tensor) -> float:
    """Exact step with H(0) = 1, as a constant (no gradient)."""
    return 1.0 if float(x.detach()) >= 0 else 0.0


def upper_step(x: Tensor, p: Steps) -> Tensor:
    """ROADMAP's H^- (docs/spec.md §2, SupAP)."""
    sig = torch.sigmoid(torch.clamp(x / p.tau, -50.0, 50.0))
    if float(x.detach()) <= 0:
        return sig
    if float(x.detach()) <= p.delta:
        return sig + 0.5
    return p.rho * (x - p.delta) + 1.0 / (1.0 + math.exp(-p.delta / p.tau)) + 0.5


def lower_step(x: Tensor, p: Steps) -> Tensor:
    """HAPPIER's H_lb (docs/spec.md §2, H-AP surrogate)."""
    if float(x.detach()) <= 0:
        return p.leak * x
    return torch.clamp(p.beta * x + p.gamma, max=1.0)


def level(query_row: list[int], item_row: list[int]) -> int:
    """Number of label columns, counted from the coarsest (last), on which the two rows agree."""
    count = 0
    for a, b in zip(reversed(query_row), reversed(item_row), strict=True):
        if a != b:
            break
        count += 1
    return count


def relevances(levels: list[int], num_levels: int, alpha: float) -> list[float]:
    """HAPPIER Eq. 4 over one query's retrieval set."""
    sizes = {lv: levels.count(lv) for lv in set(levels)}
    return [0.0 if lv == 0 else (lv / num_levels) ** alpha / sizes[lv] for lv in levels]


def retrieval_sets(
    embeddings: Tensor,
    labels: Tensor,
    ref_embeddings: Tensor | None = None,
    ref_labels: Tensor | None = None,
    ids: Tensor | None = None,
    ref_ids: Tensor | None = None,
) -> list[tuple[list[Tensor], list[int]]]:
    """For each query: the scores (torch scalars) and levels of its retrieval set, the query itself removed."""
    labels = labels[:, None] if labels.ndim == 1 else labels
    if ref_embeddings is None:
        ref_embeddings, ref_labels = embeddings, labels
        ids = ref_ids = torch.arange(embeddings.shape[0])
    ref_labels = ref_labels[:, None] if ref_labels.ndim == 1 else ref_labels
    embeddings, ref_embeddings = unit(embeddings), unit(ref_embeddings)  # docs/spec.md §0: normalised first
    out = []
    for q in range(embeddings.shape[0]):
        scores, levels = [], []
        for j in range(ref_embeddings.shape[0]):
            if ids is not None and int(ids[q]) == int(ref_ids[j]):
                continue
            scores.append(torch.dot(embeddings[q], ref_embeddings[j]))
            levels.append(level(labels[q].tolist(), ref_labels[j].tolist()))
        out.append((scores, levels))
    return out


def exact_hap(scores: list[Tensor], levels: list[int], num_levels: int, alpha: float = 1.0) -> float | None:
    """H-AP of one query (docs/spec.md §1), or None without relevant item."""
    rel = relevances(levels, num_levels, alpha)
    relevant = [k for k, lv in enumerate(levels) if lv >= 1]
    if not relevant:
        return None
    total = 0.0
    for k in relevant:
        rank = 1 + sum(heaviside(scores[j] - scores[k]) for j in range(len(scores)) if j != k)
        hrank = rel[k] + sum(
            min(rel[k], rel[j]) * heaviside(scores[j] - scores[k]) for j in relevant if j != k
        )
        total += hrank / rank
    return total / sum(rel[k] for k in relevant)


def surrogate_hap(
    scores: list[Tensor], levels: list[int], num_levels: int, alpha: float, p: Steps, with_hrank: bool
) -> Tensor | None:
    """HAPPIER Eq. 5 surrogate H-AP of one query, or None without relevant item."""
    rel = relevances(levels, num_levels, alpha)
    relevant = [k for k, lv in enumerate(levels) if lv >= 1]
    if not relevant:
        return None
    total = torch.zeros((), dtype=torch.float64)
    for k in relevant:
        rank = torch.ones((), dtype=torch.float64)
        hrank = torch.tensor(rel[k], dtype=torch.float64)
        for j in range(len(scores)):
            if j == k:
                continue
            x = scores[j] - scores[k]
            rank = rank + (upper_step(x, p) if levels[j] < levels[k] else heaviside(x))
            if levels[j] >= 1:
                step = lower_step(x, p) if (with_hrank and levels[j] > levels[k]) else heaviside(x)
                hrank = hrank + min(rel[k], rel[j]) * step
        total = total + hrank / rank
    return total / sum(rel[k] for k in relevant)


def hap_loss(
    embeddings: Tensor,
    labels: Tensor,
    *,
    alpha: float = 1.0,
    steps: Steps = Steps(),
    with_hrank: bool = True,
    **refs: Tensor | None,
) -> Tensor:
    """Mean over queries with a relevant item of ``1 - surrogate H-AP``."""
    num_levels = 1 if labels.ndim == 1 else labels.shape[1]
    values = [surrogate_hap(s, lv, num_levels, alpha, steps, with_hrank) for s, lv in
              retrieval_sets(embeddings, labels, **refs)]
    values = [1 - v for v in values if v is not None]
    return sum(values) / len(values)


def mean_hap(embeddings: Tensor, labels: Tensor, *, alpha: float = 1.0, **refs: Tensor | None) -> float:
    """Exact mean H-AP over the queries with a relevant item."""
    num_levels = 1 if labels.ndim == 1 else labels.shape[1]
    values = [exact_hap(s, lv, num_levels, alpha) for s, lv in retrieval_sets(embeddings, labels, **refs)]
    values = [v for v in values if v is not None]
    return sum(values) / len(values)


def mean_ap(embeddings: Tensor, labels: Tensor) -> float:
    """Exact binary mAP (docs/spec.md §1) with positives = same label, query excluded."""
    values = []
    for scores, levels in retrieval_sets(embeddings, labels):
        pos = [k for k, lv in enumerate(levels) if lv >= 1]
        if not pos:
            continue
        ap = 0.0
        for k in pos:
            rank = 1 + sum(heaviside(scores[j] - scores[k]) for j in range(len(scores)) if j != k)
            rank_pos = 1 + sum(heaviside(scores[j] - scores[k]) for j in pos if j != k)
            ap += rank_pos / rank
        values.append(ap / len(pos))
    return sum(values) / len(values)


def supap_loss(embeddings: Tensor, labels: Tensor, steps: Steps = Steps()) -> Tensor:
    """SupAP (ROADMAP Eq. 4-5): exact rank^+, H^- on the negatives; ``1 - mean_q AP^s_q``."""
    values = []
    for scores, levels in retrieval_sets(embeddings, labels):
        pos = [k for k, lv in enumerate(levels) if lv >= 1]
        if not pos:
            continue
        ap = torch.zeros((), dtype=torch.float64)
        for k in pos:
            rank_pos = 1 + sum(heaviside(scores[j] - scores[k]) for j in pos if j != k)
            rank_neg = sum(upper_step(scores[j] - scores[k], steps) for j in range(len(scores)) if levels[j] == 0)
            ap = ap + rank_pos / (rank_pos + rank_neg)
        values.append(1 - ap / len(pos))
    return sum(values) / len(values)


def cluster_loss(embeddings: Tensor, fine_labels: Tensor, proxies: Tensor, temperature: float) -> Tensor:
    """HAPPIER Eq. 6: mean over samples of ``-log softmax(<v, p_z / |p_z|> / temperature)[y]``."""
    embeddings = unit(embeddings)
    total = torch.zeros((), dtype=torch.float64)
    for i in range(embeddings.shape[0]):
        logits = [torch.dot(embeddings[i], p / p.norm()) / temperature for p in proxies]
        log_norm = torch.logsumexp(torch.stack(logits), 0)
        total = total + log_norm - logits[int(fine_labels[i])]
    return total / embeddings.shape[0]


def csl_loss(
    embeddings: Tensor, labels: Tensor, proxies: Tensor, class_labels: Tensor, margins: list[float], scale: float
) -> Tensor:
    """CSL (Sun et al. 2021): per level h, ``log(1 + sum_{n} exp(scale (s_n - s_y + m_h)))`` over the proxies ``n``
    whose class differs from the sample's at column h, ``s_y`` the similarity to the sample's own fine proxy; mean over
    samples, sum over levels. A proxy whose label at column h is unknown (-1) is no negative at that level."""
    embeddings = unit(embeddings)
    total = torch.zeros((), dtype=torch.float64)
    for h, margin in enumerate(margins):
        level_total = torch.zeros((), dtype=torch.float64)
        for i in range(embeddings.shape[0]):
            own = torch.dot(embeddings[i], proxies[int(labels[i, 0])] / proxies[int(labels[i, 0])].norm())
            terms = [torch.ones((), dtype=torch.float64)]
            for c in range(proxies.shape[0]):
                if int(class_labels[c, h]) not in (-1, int(labels[i, h])):
                    sim = torch.dot(embeddings[i], proxies[c] / proxies[c].norm())
                    terms.append(torch.exp(scale * (sim - own + margin)))
            level_total = level_total + torch.log(sum(terms))
        total = total + level_total / embeddings.shape[0]
    return total


# the registered losses' oracles (tests/losses/test_raw_inputs.py): oracle(module, unit-norm embeddings, [B, 2] labels)
RAW_ORACLES = {
    "HAPLoss": lambda m, e, y: hap_loss(e, y),
    "HAPLoss_without_hrank": lambda m, e, y: hap_loss(e, y, with_hrank=False),
    "HAPPIERLoss": lambda m, e, y: 0.9 * hap_loss(e, y) + 0.1 * cluster_loss(e, y[:, 0], m.cluster.proxies, 0.05),
    "ClusterLoss": lambda m, e, y: cluster_loss(e, y[:, 0], m.proxies, 0.05),
    "CSLLoss": lambda m, e, y: csl_loss(e, y, m.proxies, y[y[:, 0].argsort()].unique(dim=0), [0.25, 0.35], 32.0),
}
