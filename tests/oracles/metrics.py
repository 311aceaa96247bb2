"""Brute-force float64 retrieval metrics, written straight from docs/spec.md §0–1 with Python loops.

Independent of ranklit: no sorting tricks, no chunking, one query and one item at a time.
"""

from __future__ import annotations

import itertools
import math

import torch


def oracle_levels(query_label: list[int], item_label: list[int]) -> int:
    """Number of label columns, counted from the coarsest, on which the two agree."""
    level = 0
    for a, b in zip(reversed(query_label), reversed(item_label), strict=True):
        if a != b:
            break
        level += 1
    return level


def _ordered_metrics(
    order: list[int], levels: list[int], same_column: list[list[bool]], num_levels: int,
    recall_at: tuple[int, ...], ndcg_at: tuple[int, ...], alpha: float,
) -> dict[str, float | None]:
    """Every metric of one query for one strict ordering ``order`` of its retrieval set (no ties left)."""
    position = {j: p + 1 for p, j in enumerate(order)}  # rank = position in the ordering
    out: dict[str, float | None] = {}
    for h in range(num_levels):
        suffix = "" if num_levels == 1 else f"_level{h}"
        positives = [j for j in order if same_column[h][j]]
        r = len(positives)
        keys = ["map", "map_at_r", "precision_at_1", *(f"recall_at_{k}" for k in recall_at), "r_precision", "mrr",
                *(f"ndcg_at_{k}" for k in ndcg_at)]
        if r == 0:
            out.update({key + suffix: None for key in keys})
            continue
        rank = {k: position[k] for k in positives}
        rank_pos = {k: i + 1 for i, k in enumerate(positives)}  # positives listed in rank order
        out["map" + suffix] = sum(rank_pos[k] / rank[k] for k in positives) / r
        out["map_at_r" + suffix] = sum(rank_pos[k] / rank[k] for k in positives if rank[k] <= r) / r
        out["precision_at_1" + suffix] = float(same_column[h][order[0]])
        for cut in recall_at:
            out[f"recall_at_{cut}" + suffix] = float(any(rank[k] <= cut for k in positives))
        out["r_precision" + suffix] = sum(1 for k in positives if rank[k] <= r) / r
        out["mrr" + suffix] = 1.0 / min(rank.values())
        for cut in ndcg_at:
            dcg = sum(1.0 / math.log2(1 + rank[k]) for k in positives if rank[k] <= cut)
            out[f"ndcg_at_{cut}" + suffix] = dcg / sum(1.0 / math.log2(1 + i) for i in range(1, min(r, cut) + 1))
    if num_levels > 1:
        out.update(_ordered_hierarchical(order, levels, num_levels, alpha))
    return out


def _ordered_hierarchical(order: list[int], levels: list[int], num_levels: int, alpha: float) -> dict:
    relevant = [k for k in order if levels[k] >= 1]
    if not relevant:
        return {"hap": None, "asi": None, "ndcg": None}
    position = {j: p + 1 for p, j in enumerate(order)}
    hap = _ordered_hap(order, levels, num_levels, alpha)
    r = len(relevant)
    ideal = sorted((levels[k] for k in order), reverse=True)
    asi = 0.0
    for cut in range(1, r + 1):
        top = [levels[j] for j in order[:cut]]
        asi += sum(min(top.count(v), ideal[:cut].count(v)) for v in range(1, num_levels + 1)) / cut
    asi /= r
    dcg = sum((2.0 ** levels[k] - 1.0) / math.log2(1 + position[k]) for k in order)
    idcg = sum((2.0 ** lv - 1.0) / math.log2(1 + i + 1) for i, lv in enumerate(ideal))
    return {"hap": hap, "asi": asi, "ndcg": dcg / idcg}


def _ordered_hap(order: list[int], levels: list[int], num_levels: int, alpha: float) -> float:
    """H-AP (HAPPIER Eq. 3) of one strict ordering with at least one item of level >= 1."""
    relevant = [k for k in order if levels[k] >= 1]
    position = {j: p + 1 for p, j in enumerate(order)}
    size = {v: sum(1 for k in order if levels[k] == v) for v in range(num_levels + 1)}
    rel = {k: ((levels[k] / num_levels) ** alpha) / size[levels[k]] if levels[k] >= 1 else 0.0 for k in order}
    hap = 0.0
    for k in relevant:
        h_rank = rel[k] + sum(min(rel[k], rel[j]) for j in relevant if position[j] < position[k])
        hap += h_rank / position[k]
    return hap / sum(rel[k] for k in relevant)


def tie_orderings(scores: list[float], levels: list[int], ties: str) -> list[list[int]]:
    """The orderings of a query's retrieval set a tie policy looks at (docs/spec.md §0, Ranks and ties).

    ``"pessimistic"``: each group of equal scores by increasing level (negatives first); ``"optimistic"``: by
    decreasing level; ``"average"``: every ordering of every group (their mean is the expectation)."""
    items = range(len(scores))
    if ties == "pessimistic":
        return [sorted(items, key=lambda j: (-scores[j], levels[j], j))]
    if ties == "optimistic":
        return [sorted(items, key=lambda j: (-scores[j], -levels[j], j))]
    groups = [[j for j in items if scores[j] == value] for value in sorted(set(scores), reverse=True)]
    choices = itertools.product(*map(itertools.permutations, groups))
    return [[j for group in choice for j in group] for choice in choices]


def oracle_query(
    scores: list[float], levels: list[int], same_column: list[list[bool]], num_levels: int,
    recall_at: tuple[int, ...], alpha: float, ndcg_at: tuple[int, ...] = (10,), ties: str = "pessimistic",
) -> dict[str, float | None]:
    """Metrics of one query. ``scores``/``levels`` cover the retrieval set only (removed items already dropped);
    ``same_column[h][j]`` says item ``j`` has the query's label at column ``h``. ``None`` = undefined (no positive).
    Each policy is the mean of the metrics over its orderings (:func:`tie_orderings`), but H-AP's
    ``"pessimistic"`` / ``"optimistic"`` value, which is its minimum / maximum over every ordering (the ordering by
    level is not always its worst or best)."""
    runs = [_ordered_metrics(order, levels, same_column, num_levels, recall_at, ndcg_at, alpha)
            for order in tie_orderings(scores, levels, ties)]
    out = {key: None if runs[0][key] is None else sum(run[key] for run in runs) / len(runs) for key in runs[0]}
    if ties != "average" and out.get("hap") is not None:
        out["hap"] = _extreme_hap(scores, levels, num_levels, alpha, best=ties == "optimistic")
    return out


def _extreme_hap(scores: list[float], levels: list[int], num_levels: int, alpha: float, best: bool) -> float:
    """H-AP's minimum (maximum if ``best``) over every ordering of the tie groups, one group at a time.

    Reordering one tie group moves neither the rank nor the H-rank of an item outside it, so H-AP is a constant plus
    one term per group, and each group's best ordering can be chosen with the others held fixed. Items of one level
    are interchangeable, so a group runs over the distinct sequences of its members' levels only (the full
    enumeration, ``tie_orderings(..., "average")``, is too long for groups of 8 and more)."""
    order = tie_orderings(scores, levels, "pessimistic")[0]
    pick = max if best else min
    for value in sorted(set(scores), reverse=True):
        slots = [p for p, j in enumerate(order) if scores[j] == value]
        by_level: dict[int, list[int]] = {}
        for p in slots:
            by_level.setdefault(levels[order[p]], []).append(order[p])
        if len(by_level) == 1:  # one level: every ordering of the group gives the same H-AP
            continue
        candidates = []
        for sequence in _distinct_sequences({v: len(items) for v, items in by_level.items()}, len(slots)):
            queues = {v: list(items) for v, items in by_level.items()}
            candidate = list(order)
            for p, v in zip(slots, sequence, strict=True):
                candidate[p] = queues[v].pop()
            candidates.append(candidate)
        order = pick(candidates, key=lambda c: _ordered_hap(c, levels, num_levels, alpha))
    return _ordered_hap(order, levels, num_levels, alpha)


def _distinct_sequences(counts: dict[int, int], length: int) -> list[tuple[int, ...]]:
    """Every distinct sequence holding ``counts[v]`` copies of each ``v``."""
    if length == 0:
        return [()]
    out = []
    for v in counts:
        if counts[v]:
            counts[v] -= 1
            out += [(v, *rest) for rest in _distinct_sequences(counts, length - 1)]
            counts[v] += 1
    return out


def oracle_retrieval_metrics(
    embeddings: torch.Tensor, labels: torch.Tensor, *, ref_embeddings: torch.Tensor | None = None,
    ref_labels: torch.Tensor | None = None, ids: torch.Tensor | None = None, ref_ids: torch.Tensor | None = None,
    junk: torch.Tensor | None = None, recall_at: tuple[int, ...] = (1, 2, 4, 8), alpha: float = 1.0,
    normalize: bool = True, ndcg_at: tuple[int, ...] = (10,), ties: str = "pessimistic", average: str = "query",
    per_query: bool = False,
) -> dict[str, float | int | list]:
    """The dictionary of ``ranklit.functional.retrieval_metrics``, by brute force (embeddings divided by their norm
    first unless ``normalize=False``, docs/spec.md §0)."""

    def unit(x: torch.Tensor) -> torch.Tensor:
        x = x.double()
        return x / torch.sqrt((x * x).sum(dim=1, keepdim=True)) if normalize else x

    embeddings = unit(embeddings)
    ref_embeddings = None if ref_embeddings is None else unit(ref_embeddings)
    q = embeddings.double().tolist()
    q_labels = labels.reshape(labels.shape[0], -1).tolist()
    if ref_embeddings is None:
        refs, r_labels = q, q_labels
        q_ids = ids.tolist() if ids is not None else list(range(len(q)))
        r_ids = q_ids
    else:
        refs, r_labels = ref_embeddings.double().tolist(), ref_labels.reshape(ref_labels.shape[0], -1).tolist()
        q_ids = ids.tolist() if ids is not None else None
        r_ids = ref_ids.tolist() if ref_ids is not None else None
    num_levels = len(q_labels[0])
    values = []
    for a in range(len(q)):
        keep = [
            j for j in range(len(refs))
            if not (q_ids is not None and q_ids[a] == r_ids[j]) and not (junk is not None and bool(junk[a, j]))
        ]
        scores = [sum(x * y for x, y in zip(q[a], refs[j], strict=True)) for j in keep]
        levels = [oracle_levels(q_labels[a], r_labels[j]) for j in keep]
        same = [[q_labels[a][h] == r_labels[j][h] for j in keep] for h in range(num_levels)]
        values.append(oracle_query(scores, levels, same, num_levels, recall_at, alpha, ndcg_at, ties))
    out: dict[str, float | int | list] = {}
    for key in values[0]:
        if per_query:
            out[key] = [math.nan if m[key] is None else m[key] for m in values]
        elif average == "class":  # the mean over the classes (finest label) of the per-class means
            by_class: dict[int, list[float]] = {}
            for m, label in zip(values, q_labels, strict=True):
                if m[key] is not None:
                    by_class.setdefault(label[0], []).append(m[key])
            means = [sum(v) / len(v) for v in by_class.values()]
            out[key] = sum(means) / len(means) if means else float("nan")
        else:
            defined = [m[key] for m in values if m[key] is not None]
            out[key] = sum(defined) / len(defined) if defined else float("nan")
    if num_levels > 1:
        for key in list(out):
            if key.endswith("_level0"):
                out[key.removesuffix("_level0")] = out[key]
    finest = "map" if num_levels == 1 else "map_level0"
    out["num_queries"] = len(q)
    out["num_queries_without_positive"] = sum(1 for m in values if m[finest] is None)
    return out


def _revisited_query(order: list[int], positives: set[int], trapezoid: bool, precision_at: tuple[int, ...]) -> dict:
    """AP and revisitop's mP@k of one strict ordering of the kept items."""
    hits, ap, last = 0, 0.0, 0
    for position, j in enumerate(order, start=1):
        if j in positives:
            hits += 1
            precision = hits / position
            if trapezoid:
                precision = (precision + ((hits - 1) / (position - 1) if position > 1 else 1.0)) / 2
            ap += precision
            last = position
    out = {"map": ap / len(positives)}
    for k in precision_at:  # P@k' with k' = min(k, position of the last positive)
        cut = min(k, last)
        out[f"mp_at_{k}"] = sum(1 for j in order[:cut] if j in positives) / cut
    return out


def oracle_revisited_map(
    queries: torch.Tensor, gallery: torch.Tensor, gnd: list[dict], trapezoid: bool,
    precision_at: tuple[int, ...] = (), ties: str = "pessimistic",
) -> dict:
    """Revisited Oxford/Paris mAP and mP@k per protocol: drop the removed items, then walk the ranking from the top,
    averaged over the orderings of the tie groups that ``ties`` looks at (:func:`tie_orderings`).

    ``trapezoid`` averages the precisions just before and at each positive (revisitop)."""
    protocols = {
        "easy": (["easy"], ["junk", "hard"]),
        "medium": (["easy", "hard"], ["junk"]),
        "hard": (["hard"], ["junk", "easy"]),
    }
    q, g = queries.double().tolist(), gallery.double().tolist()
    out: dict[str, float | int] = {}
    for name, (pos_keys, removed_keys) in protocols.items():
        values = []
        for a, entry in enumerate(gnd):
            positives = {i for k in pos_keys for i in entry[k]}
            removed = {i for k in removed_keys for i in entry[k]} - positives
            if not positives:
                continue
            kept = [j for j in range(len(g)) if j not in removed]
            scores = [sum(x * y for x, y in zip(q[a], g[j], strict=True)) for j in kept]
            levels = [int(j in positives) for j in kept]
            runs = [_revisited_query([kept[i] for i in order], positives, trapezoid, precision_at)
                    for order in tie_orderings(scores, levels, ties)]
            values.append({key: sum(run[key] for run in runs) / len(runs) for key in runs[0]})
        for key in ("map", *(f"mp_at_{k}" for k in precision_at)):
            out[f"{key}_{name}"] = sum(v[key] for v in values) / len(values) if values else math.nan
    out["num_queries"] = len(gnd)
    return out
