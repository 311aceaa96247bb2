"""Approximate search with faiss (``pip install "ranklit[faiss]"``), and its recall against ranklit's exact search.

Scores are inner products (the descriptors are L2-normalised: cosine similarities), as in the exact search of
:func:`ranklit.index.neighbours.top_k`. The kinds, as faiss ``index_factory`` strings:

- ``flat``: ``Flat``, exhaustive (the exact result, faiss's BLAS kernels; ``N·D`` floats in memory);
- ``ivf``: ``IVF<nlist>,Flat``, ``nlist`` k-means cells, ``nprobe`` of them visited per query;
- ``hnsw``: ``HNSW<m>``, a graph of ``m`` links per node (no training; ``efSearch`` = ``max(nprobe, k)``·4);
- ``pq``: ``IVF<nlist>,PQ<m>``, cells of vectors compressed to ``m`` bytes (``D`` divisible by ``m``); below
  ``39 · 256`` descriptors (too few to train 256 centroids a sub-space) ``PQ<m>x4``, ``m`` half-bytes.

IVF and PQ are trained on at most ``train_rows`` descriptors drawn at random. **Recall@k** of an approximate search
is ``mean_q |A_k(q) ∩ E_k(q)| / k`` with ``A_k`` its top-k and ``E_k`` the exact top-k (ties aside, 1 for ``flat``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from ranklit.errors import UserError

if TYPE_CHECKING:  # the landmark pipeline imports torchmetrics: not for `ranklit index --help`
    from ranklit.index import Descriptors

__all__ = ["BACKENDS", "factory_string", "build_faiss_index", "faiss_search", "recall_at_k"]

BACKENDS = ("exact", "flat", "ivf", "hnsw", "pq")


def _faiss() -> Any:
    try:
        import faiss
    except ImportError:
        hint = '`pip install "ranklit[faiss]"` (or use `--backend exact`)'
        raise UserError(f"the faiss backends need faiss: {hint}.") from None
    return faiss


def default_nlist(rows: int) -> int:
    """``round(4·sqrt(N))`` cells, at most ``N / 39`` (faiss wants 39 training points a cell), at least 1.

    >>> default_nlist(10**6), default_nlist(100)
    (4000, 2)
    """
    return max(1, min(round(4 * math.sqrt(rows)), rows // 39))


def factory_string(backend: str, dim: int, rows: int, *, nlist: int | None = None, m: int | None = None) -> str:
    """The faiss ``index_factory`` string of ``backend`` for ``rows`` descriptors of size ``dim`` (module docstring).

    >>> factory_string("ivf", 512, 10**5), factory_string("pq", 512, 10**5), factory_string("hnsw", 512, 10)
    ('IVF1265,Flat', 'IVF1265,PQ64', 'HNSW32')
    >>> factory_string("pq", 512, 2000)
    'IVF51,PQ64x4'
    """
    if backend not in BACKENDS[1:]:
        raise UserError(f"`--backend` must be one of {', '.join(BACKENDS)}, got {backend!r}.")
    cells = default_nlist(rows) if nlist is None else nlist
    if backend == "flat":
        return "Flat"
    if backend == "ivf":
        return f"IVF{cells},Flat"
    if backend == "hnsw":
        return f"HNSW{m or 32}"
    code = m or max(1, dim // 8)
    if dim % code:
        raise UserError(f"`--m` ({code}) must divide the descriptor size {dim} (product quantiser bytes per vector).")
    return f"IVF{cells},PQ{code}" if rows >= 39 * 256 else f"IVF{cells},PQ{code}x4"  # x4: 16 centroids a sub-space


def build_faiss_index(descriptors: Descriptors, factory: str, *, train_rows: int = 100_000, seed: int = 0) -> Any:
    """A faiss index of ``factory`` over ``descriptors`` (trained if needed, then filled chunk by chunk).

    Example:
        >>> from ranklit.index import TensorDescriptors
        >>> gallery = torch.nn.functional.normalize(torch.randn(100, 8), dim=1)
        >>> index = build_faiss_index(TensorDescriptors(gallery), "Flat")
        >>> faiss_search(index, gallery[:2], 1)[1].tolist()
        [[0], [1]]
    """
    faiss = _faiss()
    index = faiss.index_factory(descriptors.dim, factory, faiss.METRIC_INNER_PRODUCT)
    if not index.is_trained:
        generator = torch.Generator().manual_seed(seed)
        sample = torch.randperm(descriptors.num_rows, generator=generator)[:train_rows].sort().values
        index.train(np.ascontiguousarray(descriptors.take(sample).float().numpy()))
    for chunk in descriptors.chunks():
        index.add(np.ascontiguousarray(chunk.float().numpy()))
    return index


def faiss_search(index: Any, queries: Tensor, k: int, *, nprobe: int | None = None) -> tuple[Tensor, Tensor]:
    """``(scores, rows)``, both ``[Q, k]`` best first, of ``queries`` in a faiss ``index`` (``-1`` rows: none found).

    ``nprobe`` sets the cells an IVF index visits (and ``4·max(nprobe, k)`` candidates of an HNSW index).
    """
    faiss = _faiss()
    if nprobe is not None:
        ivf = faiss.try_extract_index_ivf(index)
        if ivf is not None:
            ivf.nprobe = nprobe
        if hasattr(index, "hnsw"):
            index.hnsw.efSearch = 4 * max(nprobe, k)
    scores, rows = index.search(np.ascontiguousarray(queries.detach().float().cpu().numpy()), k)
    return torch.from_numpy(scores), torch.from_numpy(rows).long()


def recall_at_k(approximate: Tensor, exact: Tensor) -> float:
    """``mean_q |A(q) ∩ E(q)| / k`` of two ``[Q, k]`` top-k row tables (module docstring).

    >>> recall_at_k(torch.tensor([[1, 2], [3, 4]]), torch.tensor([[2, 1], [3, 5]]))
    0.75
    """
    if approximate.shape != exact.shape or exact.ndim != 2:
        raise ValueError(f"two [Q, k] tables are needed, got {tuple(approximate.shape)} and {tuple(exact.shape)}.")
    hits = (approximate[:, :, None] == exact[:, None, :]).any(2).sum(1)
    return float(hits.float().mean() / exact.shape[1]) if exact.numel() else 1.0
