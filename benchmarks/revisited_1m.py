"""R1M-scale landmark evaluation: 70 queries against a tiny gallery plus 1,000,000 random distractors, streamed.

The distractor descriptors (float32, ``--dim`` 2048: 8 GB for a million) never sit in memory: they are generated
chunk by chunk (seeded per chunk) and written as ``.npy`` shards by :class:`ranklit.index.descriptors.
DescriptorWriter` (what ``ranklit predict`` writes), then :func:`ranklit.landmarks.revisited_map` (optionally after
α-QE, ``--qe``, and a learnt whitening, ``--whiten``) reads them back chunk by chunk. Each phase runs in a fresh
child process, which reports its wall time and its peak resident memory (``ru_maxrss``; the page cache the shards
pass through is not resident memory of the process).

The tiny gallery (``--gallery`` rows) holds, per query, 8 easy and 4 hard positives and 4 junk items (the query's
descriptor plus noise of growing size) among random negatives; gnd lists in revisitop's layout. Gallery rows come
first (indices ``0..gallery-1``), then the distractors.

Full size, on idle cores (the lead's run; about 8.2 GB of shards under ``--folder``, deleted unless ``--keep``)::

    python benchmarks/revisited_1m.py --distractors 1000000 --qe --threads 2

A quick check at a small size::

    python benchmarks/revisited_1m.py --distractors 20000 --qe --whiten
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ranklit.index import DescriptorShards, DescriptorWriter
from ranklit.landmarks import revisited_map
from ranklit.landmarks.postprocess import AlphaQueryExpansion, LearntWhitening, apply_postprocess

NUM_QUERIES = 70
ROLES = (("easy", 8, 0.5), ("hard", 4, 1.6), ("junk", 4, 1.0))  # (list, items per query, noise scale)


def _unit(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.normalize(x, dim=1)


def _generate(args: argparse.Namespace) -> dict[str, Any]:
    folder = Path(args.folder)
    g = torch.Generator().manual_seed(args.seed)
    queries = _unit(torch.randn(NUM_QUERIES, args.dim, generator=g))
    gallery = _unit(torch.randn(args.gallery, args.dim, generator=g))
    gnd: list[dict[str, list[int]]] = []
    slot = iter(torch.randperm(args.gallery, generator=g).tolist())
    for q in range(NUM_QUERIES):
        entry: dict[str, Any] = {"bbx": [0.0, 0.0, 1.0, 1.0]}
        for role, count, noise in ROLES:
            rows = [next(slot) for _ in range(count)]
            gallery[rows] = _unit(queries[q] + noise * torch.randn(count, args.dim, generator=g) / args.dim**0.25)
            entry[role] = rows
        gnd.append(entry)
    np.save(folder / "queries.npy", queries.numpy())
    (folder / "gnd.json").write_text(json.dumps(gnd))
    writer = DescriptorWriter(folder / "gallery", "part0-gallery", shard_rows=args.chunk)
    writer.append(gallery, torch.arange(args.gallery))
    writer.close()
    writer = DescriptorWriter(folder / "gallery", "part1-distractors", shard_rows=args.chunk)
    for number, start in enumerate(range(0, args.distractors, args.chunk)):
        rows = min(args.chunk, args.distractors - start)
        chunk_generator = torch.Generator().manual_seed(args.seed * 1_000_003 + number + 1)
        writer.append(_unit(torch.randn(rows, args.dim, generator=chunk_generator)),
                      torch.arange(args.gallery + start, args.gallery + start + rows))
    writer.close()
    size = sum(p.stat().st_size for p in (folder / "gallery").iterdir())
    return {"shards_gb": size / 1e9}


def _evaluate(args: argparse.Namespace) -> dict[str, Any]:
    folder = Path(args.folder)
    queries = torch.from_numpy(np.load(folder / "queries.npy"))
    gnd = json.loads((folder / "gnd.json").read_text())
    gallery = DescriptorShards(folder / "gallery")
    steps: list[Any] = []
    training = None
    if args.whiten:  # learnt from the tiny gallery's rows (stands for the training descriptors), applied streamed
        training = gallery.take(torch.arange(args.gallery))
        steps.append(LearntWhitening(power=0.25))
    if args.qe:
        steps.append(AlphaQueryExpansion(alpha=2.0, k=10))
    queries, processed = apply_postprocess(steps, queries, gallery, training)
    values = revisited_map(queries, processed, gnd, precision_at=(1, 5, 10), trapezoid=True)
    return {key: round(value, 4) for key, value in values.items() if key.startswith(("map", "mp_at_10"))}


def _child(phase: str, args: argparse.Namespace, queue: Any) -> None:
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    result = {"generate": _generate, "evaluate": _evaluate}[phase](args)
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # kB on Linux
    queue.put({"phase": phase, "seconds": round(time.perf_counter() - start, 1), "peak_rss_gb": round(peak_gb, 2),
               **result})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--distractors", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=2048)
    parser.add_argument("--gallery", type=int, default=5000, help="rows of the tiny gallery (ground truth inside)")
    parser.add_argument("--chunk", type=int, default=8192, help="rows per shard and per chunk read")
    parser.add_argument("--qe", action="store_true", help="α-QE (α = 2, k = 10) before ranking")
    parser.add_argument("--whiten", action="store_true", help="learnt whitening (costs N·D² on the whole gallery)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--folder", default=None, help="where the shards go (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the shards (and reuse them: skip generation)")
    args = parser.parse_args()
    needed = NUM_QUERIES * sum(count for _, count, _ in ROLES)
    if args.gallery < needed:
        parser.error(f"--gallery must hold the {needed} easy/hard/junk items of the {NUM_QUERIES} queries")
    folder = Path(args.folder or tempfile.mkdtemp(prefix="ranklit-r1m-"))
    folder.mkdir(parents=True, exist_ok=True)
    args.folder = str(folder)
    context = mp.get_context("fork")
    reuse = args.keep and (folder / "gallery" / "part1-distractors.json").is_file()
    phases = ["evaluate"] if reuse else ["generate", "evaluate"]
    size_gb = 4 * args.dim * (args.gallery + args.distractors) / 1e9
    print(f"{NUM_QUERIES} queries, {args.gallery} gallery rows + {args.distractors} distractors of {args.dim} floats "
          f"({size_gb:.2f} GB as float32), {args.threads} threads")
    try:
        for phase in phases:
            queue = context.Queue()
            process = context.Process(target=_child, args=(phase, args, queue))
            process.start()
            process.join()
            if process.exitcode != 0:
                raise SystemExit(f"the {phase} phase failed (exit code {process.exitcode})")
            print(json.dumps(queue.get()))
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
