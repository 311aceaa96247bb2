"""Search latency and peak memory: ranklit's exact streamed search next to faiss-cpu Flat and IVF (recall@10 of each).

For each gallery size (``--sizes``, default 10⁵ and 10⁶ descriptors of ``--dim`` 512), the gallery is written as
descriptor shards on disk (:class:`ranklit.index.descriptors.DescriptorWriter`, the files ``ranklit index``
writes: 2 GB for 10⁶ × 512 float32). The descriptors are a mixture, as trained embeddings are: ``--clusters`` random
unit centres, each item a centre plus Gaussian noise (``--noise`` per dimension), L2-normalised; the ``--queries``
queries are fresh draws of the same mixture. Methods, each in a fresh child process:

- **ranklit exact**: :func:`ranklit.index.neighbours.top_k` over the shards, chunk by chunk (what
  ``Retriever`` and ``ranklit search`` run): memory ``O(Q·(k + chunk))``, the gallery never in memory;
- **faiss Flat**: ``IndexFlatIP`` (exhaustive, the gallery in memory), filled chunk by chunk;
- **faiss IVF**: ``IVF<nlist>,Flat`` with ``nlist = 4·sqrt(N)``, trained on 100,000 rows, ``nprobe`` of
  ``--nprobe`` (one row each).

Columns: build time (faiss: reading the shards, training and adding; exact: none), search time per query when the
``--queries`` queries are searched in one batch, the latency of one query alone (median of 5), the peak resident
memory of the child above its resident set once the queries are ready (``VmHWM − VmRSS``, Linux; the page cache the
shards pass through is not counted), and recall@10 against the exact top-10.

Run (about 10 minutes on 2 cores; ``--sizes 100000`` for about one)::

    python benchmarks/search.py --threads 2
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from ranklit.deploy._faiss_backend import build_faiss_index, faiss_search, recall_at_k
from ranklit.index import DescriptorShards, DescriptorWriter, top_k

K = 10


def _status(field: str) -> int:
    with open("/proc/self/status") as handle:
        return next((int(line.split()[1]) * 1024 for line in handle if line.startswith(field)), 0)


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")  # VmHWM back to the current resident set (Linux >= 4.0)
    except OSError:
        pass


def _mixture(rows: int, centres: torch.Tensor, noise: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    picks = torch.randint(0, centres.shape[0], (rows,), generator=g)
    points = centres[picks] + noise * torch.randn(rows, centres.shape[1], generator=g)
    return torch.nn.functional.normalize(points, dim=1)


def _write_gallery(folder: Path, size: int, centres: torch.Tensor, noise: float) -> None:
    writer = DescriptorWriter(folder, shard_rows=65_536)
    for number, start in enumerate(range(0, size, 65_536)):
        rows = min(65_536, size - start)
        writer.append(_mixture(rows, centres, noise, seed=1000 + number), torch.arange(start, start + rows))
    writer.close()


def _child(method: str, folder: str, queries: torch.Tensor, nprobe: int, threads: int, out: Any) -> None:
    torch.set_num_threads(threads)
    import faiss

    faiss.omp_set_num_threads(threads)
    gallery = DescriptorShards(folder)
    queries = queries.clone()
    before = _status("VmRSS:")
    _reset_peak()
    build = 0.0
    if method == "exact":
        search = lambda q: top_k(q, gallery, K)  # noqa: E731
    else:
        started = time.perf_counter()
        factory = "Flat" if method == "faiss Flat" else f"IVF{max(1, round(4 * math.sqrt(gallery.num_rows)))},Flat"
        structure = build_faiss_index(gallery, factory, train_rows=100_000)
        build = time.perf_counter() - started
        search = lambda q: faiss_search(structure, q, K, nprobe=nprobe)  # noqa: E731
    started = time.perf_counter()
    rows = search(queries)[1]
    batch = time.perf_counter() - started
    single = []
    for q in range(5):
        started = time.perf_counter()
        search(queries[q : q + 1])
        single.append(time.perf_counter() - started)
    peak = max(0, _status("VmHWM:") - before)
    # numpy rows: a tensor would travel as shared memory, which the exiting child takes away
    out.put({"build_s": build, "ms_per_query": 1000 * batch / queries.shape[0],
             "latency_ms": 1000 * statistics.median(single), "peak_mb": peak / 2**20, "rows": rows.numpy()})


def _run(method: str, folder: Path, queries: torch.Tensor, nprobe: int, threads: int) -> dict[str, Any]:
    context = mp.get_context("spawn")  # fork after torch's OpenMP threads ran can deadlock the child
    out = context.Queue()
    child = context.Process(target=_child, args=(method, str(folder), queries, nprobe, threads, out))
    child.start()
    result = out.get()
    child.join()
    return {**result, "rows": torch.from_numpy(result["rows"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--clusters", type=int, default=10_000)
    parser.add_argument("--noise", type=float, default=0.03, help="noise per dimension around a centre")
    parser.add_argument("--nprobe", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--folder", default=None, help="where the shards go (default: a temporary folder)")
    args = parser.parse_args()
    centres = torch.nn.functional.normalize(torch.randn(args.clusters, args.dim, generator=torch.Generator()
                                                        .manual_seed(0)), dim=1)
    queries = _mixture(args.queries, centres, args.noise, seed=1)
    import faiss

    print(f"machine: {platform.machine()}, {os.cpu_count()} visible cores, load average {os.getloadavg()[0]:.1f}; "
          f"torch {torch.__version__}, faiss {faiss.__version__}; threads {args.threads}; d = {args.dim}, "
          f"{args.queries} queries, k = {K}")
    print("| gallery | method | build s | search ms / query (batch) | 1-query latency ms | peak MB | recall@10 |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for size in args.sizes:
        root = Path(args.folder or tempfile.mkdtemp(prefix="ranklit-search-"))
        folder = root / f"gallery-{size}"
        try:
            _write_gallery(folder, size, centres, args.noise)
            exact = _run("exact", folder, queries, 0, args.threads)
            methods = [("ranklit exact (streamed)", exact), ("faiss Flat", _run("faiss Flat", folder, queries, 0,
                                                                               args.threads))]
            methods += [(f"faiss IVF, nprobe {p}", _run("faiss IVF", folder, queries, p, args.threads))
                        for p in args.nprobe]
            for name, r in methods:
                recall = recall_at_k(r["rows"], exact["rows"])
                print(f"| {size:,} | {name} | {r['build_s']:.1f} | {r['ms_per_query']:.2f} | {r['latency_ms']:.1f} "
                      f"| {r['peak_mb']:.0f} | {recall:.3f} |", flush=True)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
