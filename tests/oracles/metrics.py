"""Brute-force float64 retrieval metrics, written straight from docs/spec.md §0–1 with Python loops.

Independent of ranklit: no sorting tricks, no chunking, one query and one item at a time.
"""

from __future__ import annotations

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


def oracle_query(
    scores: list[float], levels: list[int], same_column: list[list[bool]], num_levels: int,
    recall_at: tuple[int, ...], alpha: float,
) -> dict[str, float | None]:
    """Metrics of one query. ``scores``/``levels`` cover the retrieval set only (removed items already dropped);
    ``same_column[h][j]`` says item ``j`` has the query's label at column ``h``. ``None`` = undefined (no positive)."""
    n = len(scores)

    def rank(k: int, among: list[int]) -> int:
        return 1 + sum(1 for j in among if j != k and scores[j] >= scores[k])

    everything = list(range(n))
    out: dict[str, float | None] = {}
    for h in range(num_levels):
        positives = [j for j in everything if same_column[h][j]]
        r = len(positives)
        suffix = "" if num_levels == 1 else f"_level{h}"
        if r == 0:
            for key in ("map", "map_at_r", "precision_at_1", *(f"recall_at_{k}" for k in recall_at)):
                out[key + suffix] = None
            continue
        ranks = {k: rank(k, everything) for k in positives}
        ranks_pos = {k: rank(k, positives) for k in positives}
        out["map" + suffix] = sum(ranks_pos[k] / ranks[k] for k in positives) / r
        out["map_at_r" + suffix] = sum(ranks_pos[k] / ranks[k] for k in positives if ranks[k] <= r) / r
        out["precision_at_1" + suffix] = float(any(ranks[k] == 1 for k in positives))
        for cut in recall_at:
            out[f"recall_at_{cut}" + suffix] = float(any(ranks[k] <= cut for k in positives))
    if num_levels > 1:
        out.update(_oracle_hierarchical(scores, levels, num_levels, alpha))
    return out


def _oracle_hierarchical(scores: list[float], levels: list[int], num_levels: int, alpha: float) -> dict:
    n = len(scores)
    relevant = [k for k in range(n) if levels[k] >= 1]
    if not relevant:
        return {"hap": None, "asi": None, "ndcg": None}
    size = {v: sum(1 for k in range(n) if levels[k] == v) for v in range(num_levels + 1)}
    rel = [((levels[k] / num_levels) ** alpha) / size[levels[k]] if levels[k] >= 1 else 0.0 for k in range(n)]
    rank = [1 + sum(1 for j in range(n) if j != k and scores[j] >= scores[k]) for k in range(n)]
    hap = 0.0
    for k in relevant:
        h_rank = rel[k] + sum(min(rel[k], rel[j]) for j in relevant if j != k and scores[j] >= scores[k])
        hap += h_rank / rank[k]
    hap /= sum(rel[k] for k in relevant)
    r = len(relevant)
    ideal = sorted(levels, reverse=True)
    asi = 0.0
    for cut in range(1, r + 1):
        top = [levels[j] for j in range(n) if rank[j] <= cut]
        asi += sum(min(top.count(v), ideal[:cut].count(v)) for v in range(1, num_levels + 1)) / cut
    asi /= r
    dcg = sum((2.0 ** levels[k] - 1.0) / math.log2(1 + rank[k]) for k in range(n))
    idcg = sum((2.0 ** lv - 1.0) / math.log2(1 + i + 1) for i, lv in enumerate(ideal))
    return {"hap": hap, "asi": asi, "ndcg": dcg / idcg}


def oracle_retrieval_metrics(
    embeddings: torch.Tensor, labels: torch.Tensor, *, ref_embeddings: torch.Tensor | None = None,
    ref_labels: torch.Tensor | None = None, ids: torch.Tensor | None = None, ref_ids: torch.Tensor | None = None,
    junk: torch.Tensor | None = None, recall_at: tuple[int, ...] = (1, 2, 4, 8), alpha: float = 1.0,
    normalize: bool = True,
) -> dict[str, float | int]:
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
    per_query = []
    for a in range(len(q)):
        keep = [
            j for j in range(len(refs))
            if not (q_ids is not None and q_ids[a] == r_ids[j]) and not (junk is not None and bool(junk[a, j]))
        ]
        scores = [sum(x * y for x, y in zip(q[a], refs[j], strict=True)) for j in keep]
        levels = [oracle_levels(q_labels[a], r_labels[j]) for j in keep]
        same = [[q_labels[a][h] == r_labels[j][h] for j in keep] for h in range(num_levels)]
        per_query.append(oracle_query(scores, levels, same, num_levels, recall_at, alpha))
    out: dict[str, float | int] = {}
    for key in per_query[0]:
        defined = [m[key] for m in per_query if m[key] is not None]
        out[key] = sum(defined) / len(defined) if defined else float("nan")
    if num_levels > 1:
        for key in ("map", "map_at_r", "precision_at_1", *(f"recall_at_{k}" for k in recall_at)):
            out[key] = out[f"{key}_level0"]
    finest = "map" if num_levels == 1 else "map_level0"
    out["num_queries"] = len(q)
    out["num_queries_without_positive"] = sum(1 for m in per_query if m[finest] is None)
    return out


def oracle_revisited_map(queries: torch.Tensor, gallery: torch.Tensor, gnd: list[dict], trapezoid: bool) -> dict:
    """Revisited Oxford/Paris mAP per protocol: drop the removed items, then walk the ranking from the top.

    Assumes distinct scores. ``trapezoid`` averages the precisions just before and at each positive (revisitop)."""
    protocols = {
        "easy": (["easy"], ["junk", "hard"]),
        "medium": (["easy", "hard"], ["junk"]),
        "hard": (["hard"], ["junk", "easy"]),
    }
    q, g = queries.double().tolist(), gallery.double().tolist()
    out: dict[str, float | int] = {}
    for name, (pos_keys, removed_keys) in protocols.items():
        aps = []
        for a, entry in enumerate(gnd):
            positives = {i for k in pos_keys for i in entry[k]}
            removed = {i for k in removed_keys for i in entry[k]} - positives
            if not positives:
                continue
            kept = [j for j in range(len(g)) if j not in removed]
            kept.sort(key=lambda j: -sum(x * y for x, y in zip(q[a], g[j], strict=True)))
            hits, ap = 0, 0.0
            for position, j in enumerate(kept, start=1):
                if j in positives:
                    hits += 1
                    precision = hits / position
                    if trapezoid:
                        precision = (precision + ((hits - 1) / (position - 1) if position > 1 else 1.0)) / 2
                    ap += precision
            aps.append(ap / len(positives))
        out[f"map_{name}"] = sum(aps) / len(aps)
    out["num_queries"] = len(gnd)
    return out
