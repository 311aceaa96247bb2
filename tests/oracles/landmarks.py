"""Float64 brute force of the landmark-retrieval evaluation, written from the definitions, sharing no ranklit code.

- revisitop's official protocol (``compute_map`` of Radenović et al. CVPR 2018): rank the whole gallery by score,
  find the 0-based positions of the positives and of the junk, shift each positive up by the junk ranked above it,
  trapezoidal AP ``sum_j ((j / pos_j if pos_j else 1) + (j + 1) / (pos_j + 1)) / (2 R)`` and ``P@k`` with
  ``k' = min(k, last positive's 1-based position)``; Easy = easy positives (hard items junk), Medium = easy + hard,
  Hard = hard positives (easy items junk).
- α-QE (Radenović et al. TPAMI 2018): ``q' = normalise(q + sum of the k best gallery rows g weighted by
  max(<q, g>, 0)^alpha)``; αDBA: the same for each gallery row over the other gallery rows.
"""

from __future__ import annotations

import math

import numpy as np

PROTOCOLS = {
    "easy": (["easy"], ["junk", "hard"]),
    "medium": (["easy", "hard"], ["junk"]),
    "hard": (["hard"], ["junk", "easy"]),
}


def _normalise(v: np.ndarray) -> np.ndarray:
    return v / math.sqrt(float(v @ v))


def oracle_alpha_qe(
    queries: np.ndarray, gallery: np.ndarray, alpha: float, k: int, skip_self: bool = False
) -> np.ndarray:
    out = []
    for a, q in enumerate(queries):
        scored = [(float(q @ g), j) for j, g in enumerate(gallery) if not (skip_self and j == a)]
        scored.sort(key=lambda t: -t[0])
        total = q.astype(np.float64).copy()
        for score, j in scored[:k]:
            total = total + max(score, 0.0) ** alpha * gallery[j]
        out.append(_normalise(total))
    return np.array(out)


def oracle_dba(gallery: np.ndarray, alpha: float, k: int) -> np.ndarray:
    return oracle_alpha_qe(gallery, gallery, alpha, k, skip_self=True)


def _official_ap(positions: list[int], num_positives: int) -> float:
    ap = 0.0
    for j, rank in enumerate(positions):
        precision_0 = 1.0 if rank == 0 else j / rank
        precision_1 = (j + 1) / (rank + 1)
        ap += (precision_0 + precision_1) / (2 * num_positives)
    return ap


def official_revisited(queries: np.ndarray, gallery: np.ndarray, gnd: list[dict], kappas: tuple[int, ...]) -> dict:
    """``{"map_<protocol>": ..., "mp_at_<k>_<protocol>": ...}`` as revisitop computes them (distinct scores)."""
    out: dict[str, float] = {}
    for name, (ok_keys, junk_keys) in PROTOCOLS.items():
        aps, precisions = [], []
        for a, entry in enumerate(gnd):
            ok = {i for key in ok_keys for i in entry[key]}
            junk = {i for key in junk_keys for i in entry[key]} - ok
            if not ok:
                continue
            ranking = sorted(range(len(gallery)), key=lambda j: -float(queries[a] @ gallery[j]))
            positions, junk_above = [], 0
            for position, j in enumerate(ranking):
                if j in junk:
                    junk_above += 1
                elif j in ok:
                    positions.append(position - junk_above)
            aps.append(_official_ap(positions, len(ok)))
            one_based = [p + 1 for p in positions]
            precisions.append([sum(p <= min(max(one_based), k) for p in one_based) / min(max(one_based), k)
                               for k in kappas])
        out[f"map_{name}"] = sum(aps) / len(aps)
        for i, k in enumerate(kappas):
            out[f"mp_at_{k}_{name}"] = sum(p[i] for p in precisions) / len(precisions)
    return out
