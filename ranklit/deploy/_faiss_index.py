"""A faiss structure for an index folder (``ranklit index --backend ivf``) and its recall against the exact search."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from ranklit.deploy._faiss_backend import _faiss, build_faiss_index, factory_string, faiss_search, recall_at_k
from ranklit.deploy._index import IndexFiles, _write_card, read_index_card
from ranklit.index import DescriptorShards, top_k

__all__ = ["add_faiss", "evaluate_recall"]


def add_faiss(
    folder: str | Path,
    backend: str,
    *,
    nlist: int | None = None,
    m: int | None = None,
    nprobe: int = 16,
    train_rows: int = 100_000,
) -> dict[str, Any]:
    """Build the faiss structure ``backend`` (``flat``, ``ivf``, ``hnsw``, ``pq``; :mod:`ranklit.deploy._faiss_backend`)
    over the descriptors of the index ``folder``, save it as ``faiss.index`` and make it the index's default search.
    Returns the card written."""
    files = IndexFiles(Path(folder))
    card = read_index_card(files.folder)
    descriptors = DescriptorShards(files.descriptors)
    factory = factory_string(backend, descriptors.dim, descriptors.num_rows, nlist=nlist, m=m)
    index = build_faiss_index(descriptors, factory, train_rows=train_rows)
    _faiss().write_index(index, str(files.faiss))
    card["index"].update(backend=backend, faiss={"factory": factory, "nprobe": nprobe})
    _write_card(files, card)
    return card


def evaluate_recall(
    folder: str | Path, *, k: int = 10, queries: int = 1000, nprobe: int | None = None, seed: int = 0
) -> dict[str, Any]:
    """Recall@k of the index's faiss search against the exact one, over ``queries`` of its own descriptors drawn at
    random (each finds itself first in both); the result is stored in the card as ``index.evaluation``.

    Returns ``{"k", "queries", "recall", "exact_ms_per_query", "faiss_ms_per_query", "factory", "nprobe"}``.
    """
    files = IndexFiles(Path(folder))
    card = read_index_card(files.folder)
    if card["index"]["backend"] == "exact":
        raise ValueError(f"{files.folder} has no faiss structure to evaluate: build it with `--backend ivf` (or flat, "
                         "hnsw, pq).")
    descriptors = DescriptorShards(files.descriptors)
    rows = torch.randperm(descriptors.num_rows, generator=torch.Generator().manual_seed(seed))[:queries].sort().values
    sample = descriptors.take(rows)
    k = min(k, descriptors.num_rows)
    probe = nprobe if nprobe is not None else card["index"]["faiss"]["nprobe"]
    started = time.perf_counter()
    exact = top_k(sample, descriptors, k)[1]
    exact_seconds = time.perf_counter() - started
    structure = _faiss().read_index(str(files.faiss))
    started = time.perf_counter()
    approximate = faiss_search(structure, sample, k, nprobe=probe)[1]
    faiss_seconds = time.perf_counter() - started
    result = {
        "k": k,
        "queries": int(rows.numel()),
        "recall": recall_at_k(approximate, exact),
        "exact_ms_per_query": 1000 * exact_seconds / max(1, rows.numel()),
        "faiss_ms_per_query": 1000 * faiss_seconds / max(1, rows.numel()),
        "factory": card["index"]["faiss"]["factory"],
        "nprobe": probe,
    }
    card["index"]["evaluation"] = result
    _write_card(files, card)
    return result
