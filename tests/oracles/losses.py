"""Float64 brute-force losses written straight from docs/spec.md §0–2 (loops over queries and ranked items).

Independent of ranklit: each oracle takes the module call's arguments, builds each query's retrieval set by the ids
rule, and evaluates the formula item by item with differentiable torch scalars, so values *and* gradients can be
compared with the library. Embeddings are L2-normalised first (docs/spec.md §0: losses normalise what they receive),
inside the autograd graph, so gradients are those with respect to the raw input.
"""

from __future__ import annotations

import torch
from torch import Tensor


def unit(x: Tensor) -> Tensor:
    """Rows divided by their Euclidean norm, in float64 (differentiable)."""
    x = x.double()
    return x / torch.sqrt((x * x).sum(dim=1, keepdim=True))


def problem(emb, labels, ref_emb=None, ref_labels=None, ids=None, ref_ids=None):
    """Queries, [Q, L] labels, retrieval set, and for each query the list of indices of its retrieval set."""
    labels = labels[:, None] if labels.ndim == 1 else labels
    if ref_emb is None:
        ref_emb, ref_labels = emb, labels
        ids = torch.arange(emb.shape[0]) if ids is None else ids
        ref_ids = ids
    ref_labels = ref_labels[:, None] if ref_labels.ndim == 1 else ref_labels
    omegas = []
    for q in range(emb.shape[0]):
        omegas.append([j for j in range(ref_emb.shape[0]) if ids is None or int(ids[q]) != int(ref_ids[j])])
    return unit(emb), labels, unit(ref_emb), ref_labels, omegas


def sig(x: Tensor, tau: float) -> Tensor:
    return torch.sigmoid(torch.clamp(x / tau, -50.0, 50.0))


def exact_h(x: Tensor) -> float:
    return 1.0 if float(x.detach()) >= 0 else 0.0


def h_minus(t: Tensor, tau: float, rho: float, delta: float) -> Tensor:
    if float(t.detach()) <= 0:
        return sig(t, tau)
    if float(t.detach()) <= delta:
        return sig(t, tau) + 0.5
    return rho * (t - delta) + torch.sigmoid(torch.tensor(delta / tau, dtype=torch.float64)) + 0.5


def _binary_queries(args):
    """Yield (fine label of q, scores of q against every ref, positives, negatives) for the queries with a positive."""
    emb, labels, ref, ref_labels, omegas = problem(*args)
    for q in range(emb.shape[0]):
        s = ref @ emb[q]
        pos = [j for j in omegas[q] if int(ref_labels[j, 0]) == int(labels[q, 0])]
        neg = [j for j in omegas[q] if int(ref_labels[j, 0]) != int(labels[q, 0])]
        if pos:
            yield int(labels[q, 0]), s, pos, neg


def smooth_ap(*args, tau=0.01):
    aps = []
    for _, s, pos, neg in _binary_queries(args):
        total = 0.0
        for k in pos:
            rank_pos = 1.0 + sum(sig(s[j] - s[k], tau) for j in pos if j != k)
            rank = rank_pos + sum(sig(s[j] - s[k], tau) for j in neg)
            total = total + rank_pos / rank
        aps.append(total / len(pos))
    return 1.0 - sum(aps) / len(aps)


def supap(*args, tau=0.01, rho=100.0, delta=0.05):
    aps = []
    for _, s, pos, neg in _binary_queries(args):
        total = 0.0
        for k in pos:
            rank_pos = 1.0 + sum(exact_h(s[j] - s[k]) for j in pos if j != k)
            rank_neg = sum(h_minus(s[j] - s[k], tau, rho, delta) for j in neg)
            total = total + rank_pos / (rank_pos + rank_neg)
        aps.append(total / len(pos))
    return 1.0 - sum(aps) / len(aps)


def average_precision(*args):
    """Exact mAP (docs/spec.md §1, H(0) = 1) over the queries with a positive."""
    aps = []
    for _, s, pos, neg in _binary_queries(args):
        total = 0.0
        for k in pos:
            rank_pos = 1.0 + sum(exact_h(s[j] - s[k]) for j in pos if j != k)
            total += rank_pos / (rank_pos + sum(exact_h(s[j] - s[k]) for j in neg))
        aps.append(total / len(pos))
    return sum(aps) / len(aps)


def calibration(*args, alpha=0.9, beta=0.6, reduction="query"):
    """ROADMAP Eq. 7 per query (``"query"``); ``"batch_active"``: pytorch-metric-learning's ContrastiveLoss with
    AvgNonZeroReducer, i.e. every positive / negative pair of the batch, each hinge sum divided by its number of
    non-zero terms, the two added."""
    if reduction == "batch_active":
        emb, labels, ref, ref_labels, omegas = problem(*args)
        pos_h, neg_h = [], []
        for q in range(emb.shape[0]):
            for j in omegas[q]:
                s = torch.dot(emb[q], ref[j])
                if int(ref_labels[j, 0]) == int(labels[q, 0]):
                    pos_h.append(torch.clamp(alpha - s, min=0))
                else:
                    neg_h.append(torch.clamp(s - beta, min=0))
        pos_h = [h for h in pos_h if float(h.detach()) > 0]
        neg_h = [h for h in neg_h if float(h.detach()) > 0]
        return (sum(pos_h) / len(pos_h) if pos_h else 0.0) + (sum(neg_h) / len(neg_h) if neg_h else 0.0)
    terms = []
    for _, s, pos, neg in _binary_queries(args):
        pos_h = [torch.clamp(alpha - s[j], min=0) for j in pos]
        neg_h = [torch.clamp(s[j] - beta, min=0) for j in neg]
        term = sum(pos_h) / len(pos_h) if pos_h else 0.0
        terms.append(term + (sum(neg_h) / len(neg_h) if neg_h else 0.0))
    return sum(terms) / len(terms)


def roadmap(*args, lam=0.5):
    return (1 - lam) * supap(*args) + lam * calibration(*args)


def contrastive(*args, pos_margin=1.0, neg_margin=0.5):
    terms = []
    for _, s, pos, neg in _binary_queries(args):
        terms.append(
            sum(torch.clamp(pos_margin - s[j], min=0) for j in pos)
            + sum(torch.clamp(s[j] - neg_margin, min=0) for j in neg)
        )
    return sum(terms) / len(terms)


def _triangle(x: Tensor, centre: float, width: float) -> Tensor:
    return torch.clamp(1.0 - torch.abs(x - centre) / width, min=0.0)


def binned_ap_one_query(values, pos, neg, centres, width, tie_aware=False):
    """AP of one query from soft histograms over ``centres`` (most relevant first), docs/spec.md §2."""
    pos_values, neg_values = values[torch.tensor(pos)], values[torch.tensor(neg, dtype=torch.long)]
    h_pos = [_triangle(pos_values, c, width).sum() for c in centres]
    h_all = [h_pos[m] + _triangle(neg_values, c, width).sum() for m, c in enumerate(centres)]
    total, cum_pos, cum_all = 0.0, 0.0, 0.0
    for m in range(len(centres)):
        before_pos, before_all = cum_pos, cum_all
        cum_pos, cum_all = cum_pos + h_pos[m], cum_all + h_all[m]
        if tie_aware:
            precision = (1 + h_pos[m] + 2 * before_pos) / (1 + h_all[m] + 2 * before_all)
        elif float(torch.as_tensor(cum_all).detach()) > 0:
            precision = cum_pos / cum_all
        else:
            precision = 0.0
        total = total + precision * h_pos[m]
    return total / len(pos)


def fastap(*args, num_bins=10):
    centres = [4.0 * j / num_bins for j in range(num_bins + 1)]
    queries = _binary_queries(args)
    aps = [binned_ap_one_query(2 - 2 * s, pos, neg, centres, 4.0 / num_bins) for _, s, pos, neg in queries]
    return 1.0 - sum(aps) / len(aps)


def softbin(*args, num_bins=20, tie_aware=False, class_balanced=False):
    width = 2.0 / (num_bins - 1)
    centres = [1.0 - m * width for m in range(num_bins)]
    by_class: dict[int, list] = {}
    for label, s, pos, neg in _binary_queries(args):
        by_class.setdefault(label, []).append(binned_ap_one_query(s, pos, neg, centres, width, tie_aware))
    if class_balanced:
        return 1.0 - sum(sum(v) / len(v) for v in by_class.values()) / len(by_class)
    aps = [ap for v in by_class.values() for ap in v]
    return 1.0 - sum(aps) / len(aps)


def _normalised_ranks(values: dict[int, float]) -> dict[int, float]:
    """Descending rank of each item among ``values`` (ties count against it), divided by the number of items."""
    return {k: sum(1 for v in values.values() if v >= values[k]) / len(values) for k in values}


def blackbox_ap(*args, lam=4.0):
    """``1 - mAP`` whose gradient is the blackbox rule ``-(r(s) - r(s + lam dL/dr)) / lam`` for both rankings.

    The returned scalar has the loss value and, through a first-order surrogate ``sum_j g_j s_j``, the gradient.
    """
    queries = list(_binary_queries(args))
    value, surrogate = 0.0, 0.0
    for _, s, pos, neg in queries:
        omega = pos + neg
        v = {j: float(s[j].detach()) for j in omega}
        ranks, ranks_pos = _normalised_ranks(v), _normalised_ranks({k: v[k] for k in pos})
        value += (1.0 - sum(ranks_pos[k] / (ranks[k] * len(omega)) for k in pos)) / len(queries)
        d_ranks = {j: 0.0 for j in omega}
        d_ranks_pos = {}
        for k in pos:  # L = 1 - mean_q sum_k rp_k / (r_k |Omega|)
            d_ranks[k] = ranks_pos[k] / (ranks[k] ** 2 * len(omega) * len(queries))
            d_ranks_pos[k] = -1.0 / (ranks[k] * len(omega) * len(queries))
        moved = _normalised_ranks({j: v[j] + lam * d_ranks[j] for j in omega})
        moved_pos = _normalised_ranks({k: v[k] + lam * d_ranks_pos[k] for k in pos})
        for j in omega:
            grad = -(ranks[j] - moved[j]) / lam
            if j in ranks_pos:
                grad += -(ranks_pos[j] - moved_pos[j]) / lam
            surrogate = surrogate + grad * s[j]
    surrogate = torch.as_tensor(surrogate, dtype=torch.float64)
    return value + surrogate - surrogate.detach()


def triplet_semihard(*args, margin=0.2):
    """Mean over (anchor, positive) pairs with a negative of ``[d_ap - d_an + margin]_+``; ``n`` = the closest
    negative with ``d_an > d_ap``, else the farthest negative; ``d = sqrt(2 - 2s)``."""
    terms = []
    for _, s, pos, neg in _binary_queries(args):
        if not neg:
            continue
        dist = {j: torch.sqrt(torch.clamp(2 - 2 * s[j], min=1e-12)) for j in pos + neg}
        for p in pos:
            farther = [n for n in neg if float(dist[n].detach()) > float(dist[p].detach())]
            if farther:
                n = min(farther, key=lambda j: float(dist[j].detach()))
            else:
                n = max(neg, key=lambda j: float(dist[j].detach()))
            terms.append(torch.clamp(dist[p] - dist[n] + margin, min=0))
    return sum(terms) / len(terms)


def proxy_softmax(emb, labels, proxies, temperature, squared_distance=False):
    """Cross-entropy of each embedding against normalised proxies: logits ``<v, p>/T`` or ``-|v - p|^2 / T``."""
    labels = labels[:, 0] if labels.ndim == 2 else labels
    emb = unit(emb)
    total = 0.0
    for i in range(emb.shape[0]):
        logits = []
        for z in range(proxies.shape[0]):
            p = proxies[z].double() / torch.linalg.norm(proxies[z].double())
            v = emb[i].double()
            logits.append(-((v - p) ** 2).sum() / temperature if squared_distance else (v @ p) / temperature)
        logits = torch.stack(logits)
        total = total - (logits[int(labels[i])] - torch.logsumexp(logits, dim=0))
    return total / emb.shape[0]


def _query_terms(args, term):
    """``[(fine label of q, term(s, pos, neg) or None without a positive)]`` for every query, in order."""
    emb, labels, ref, ref_labels, omegas = problem(*args)
    out = []
    for q in range(emb.shape[0]):
        s = ref @ emb[q]
        pos = [j for j in omegas[q] if int(ref_labels[j, 0]) == int(labels[q, 0])]
        neg = [j for j in omegas[q] if int(ref_labels[j, 0]) != int(labels[q, 0])]
        out.append((int(labels[q, 0]), term(s, pos, neg) if pos else None))
    return out


def reduce_terms(terms, reducer):
    """docs/spec.md reducers over ``[(class, term or None)]``: ``"mean"``, ``"class_balanced"``, ``"active"``,
    ``"none"`` (a [Q] tensor, 0 for a query without positive)."""
    kept = [(c, t) for c, t in terms if t is not None]
    if reducer == "none":
        zero = torch.zeros((), dtype=torch.float64)
        return torch.stack([zero if t is None else torch.as_tensor(t, dtype=torch.float64) for _, t in terms])
    if reducer == "active":
        kept = [(c, t) for c, t in kept if float(torch.as_tensor(t).detach()) != 0.0]
        return sum(t for _, t in kept) / len(kept) if kept else torch.zeros((), dtype=torch.float64)
    if reducer == "class_balanced":
        classes = sorted({c for c, _ in kept})
        means = [sum(t for c2, t in kept if c2 == c) / sum(1 for c2, _ in kept if c2 == c) for c in classes]
        return sum(means) / len(means)
    return sum(t for _, t in kept) / len(kept)


def smooth_ap_terms(*args, tau=0.01):
    """Per-query ``1 - AP_q`` of Smooth-AP (``None`` for a query without positive)."""

    def term(s, pos, neg):
        total = 0.0
        for k in pos:
            rank_pos = 1.0 + sum(sig(s[j] - s[k], tau) for j in pos if j != k)
            total = total + rank_pos / (rank_pos + sum(sig(s[j] - s[k], tau) for j in neg))
        return 1.0 - total / len(pos)

    return _query_terms(args, term)


def supap_terms(*args, tau=0.01, rho=100.0, delta=0.05):
    """Per-query ``1 - AP_q`` of SupAP (``None`` for a query without positive)."""

    def term(s, pos, neg):
        total = 0.0
        for k in pos:
            rank_pos = 1.0 + sum(exact_h(s[j] - s[k]) for j in pos if j != k)
            total = total + rank_pos / (rank_pos + sum(h_minus(s[j] - s[k], tau, rho, delta) for j in neg))
        return 1.0 - total / len(pos)

    return _query_terms(args, term)


def _fine(labels: Tensor) -> Tensor:
    return labels[:, 0]


# the registered losses' oracles (tests/losses/test_raw_inputs.py): oracle(module, unit-norm embeddings, [B, 2] labels)
RAW_ORACLES = {
    "SmoothAPLoss": lambda m, e, y: smooth_ap(e, _fine(y)),
    "SupAPLoss": lambda m, e, y: supap(e, _fine(y)),
    "CalibrationLoss": lambda m, e, y: calibration(e, _fine(y)),
    "ROADMAPLoss": lambda m, e, y: roadmap(e, _fine(y)),
    "FastAPLoss": lambda m, e, y: fastap(e, _fine(y)),
    "SoftBinAPLoss": lambda m, e, y: softbin(e, _fine(y)),
    "SoftBinAPLoss_options": lambda m, e, y: softbin(e, _fine(y), tie_aware=True, class_balanced=True),
    "BlackBoxAPLoss": lambda m, e, y: blackbox_ap(e, _fine(y)),
    "ContrastiveLoss": lambda m, e, y: contrastive(e, _fine(y)),
    "TripletLoss": lambda m, e, y: triplet_semihard(e, _fine(y)),
    "NormSoftmaxLoss": lambda m, e, y: proxy_softmax(e, y, m.proxies, 0.05),
    "ProxyNCAPPLoss": lambda m, e, y: proxy_softmax(e, y, m.proxies, 1 / 9, squared_distance=True),
    "LevelSumLoss": lambda m, e, y: supap(e, y[:, 0]) + supap(e, y[:, 1]),
}
