"""Where the time of the exact metrics goes: the score product, the counting, and the rest (issue 31's question).

Usage::

    python benchmarks/metrics_split.py                     # N = 10,000, d = 128, flat and 2-level, 1 and 2 threads
    python benchmarks/metrics_split.py --dry-run           # tiny, what the test suite runs

For each configuration (the data of ``benchmarks/metrics.py``: every item ranks the others, or 2,000 queries against
the other items), ``retrieval_metrics`` is timed whole, and while it runs every call of the counting
(``count_at_least``: how many items of a row score at least each positive's or relevant item's score) is timed
too, and the check for tied scores (``warn_if_tied``: a sample of the queries scored and sorted); the product
``Q @ G.T`` is timed alone. The rest (sorting the positives, the per-query metrics, the input checks) is the
difference. Medians of ``--repeats`` runs, wall-clock seconds.

A second table gives the cost per item of the vectorised PyTorch operations such a counting is made of, on a
cache-sized tile of scores (one thread): the floor of any exact count written with them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from metrics import make_data  # type: ignore[import-not-found]  # benchmarks/ is the script's folder


def _timed(function: Callable[..., Any], spent: list[float]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - start)

    return timed


def split(embeddings: torch.Tensor, labels: torch.Tensor, queries: int, repeats: int) -> tuple[float, ...]:
    """``(total, product, counting, tie check)`` medians in seconds of one configuration."""
    from ranklit.functional import retrieval_metrics
    from ranklit.functional.metrics import _hierarchical as _hierarchical_metrics
    from ranklit.functional.metrics import _positive_ranks, _retrieval, _symmetric_ranks

    if queries:
        args = (embeddings[:queries], labels[:queries])
        kwargs = dict(ref_embeddings=embeddings[queries:], ref_labels=labels[queries:])
        gallery = embeddings[queries:]
    else:
        args, kwargs, gallery = (embeddings, labels), {}, embeddings
    totals, products, countings, checks = [], [], [], []
    modules = (_hierarchical_metrics, _positive_ranks, _symmetric_ranks)
    originals = [module.count_at_least for module in modules]
    warn_if_tied = _retrieval.warn_if_tied
    for _ in range(repeats):
        spent: list[float] = []
        checked: list[float] = []
        for module, original in zip(modules, originals, strict=True):
            module.count_at_least = _timed(original, spent)
        _retrieval.warn_if_tied = _timed(warn_if_tied, checked)
        try:
            start = time.perf_counter()
            retrieval_metrics(*args, **kwargs)
            totals.append(time.perf_counter() - start)
        finally:
            for module, original in zip(modules, originals, strict=True):
                module.count_at_least = original
            _retrieval.warn_if_tied = warn_if_tied
        countings.append(sum(spent))
        checks.append(sum(checked))
        start = time.perf_counter()
        args[0] @ gallery.T.contiguous()
        products.append(time.perf_counter() - start)
    return tuple(statistics.median(times) for times in (totals, products, countings, checks))


def operation_costs(items: int, repeats: int) -> list[tuple[str, float]]:
    """Nanoseconds per item of the operations of a binned count on a ``[rows, 10000]`` tile of ``items`` scores."""
    columns = min(items, 10_000)
    rows = max(1, items // columns)
    scores = torch.rand(rows, columns)
    offsets = (torch.arange(rows) * 4098 + 1.0)[:, None]
    bins = (scores * 4095).add_(offsets).to(torch.int32).view(-1)
    holds = torch.zeros(rows * 4098, dtype=torch.bool)
    holds[::40] = True
    flags = holds.index_select(0, bins)
    scratch = torch.empty_like(scores)
    operations: list[tuple[str, Callable[[], Any]]] = [
        ("element-wise float operation (sub, in the cache)", lambda: torch.sub(scores, 0.5, out=scratch)),
        ("float to int32 (the bin)", lambda: bins.view(rows, columns).copy_(scratch)),
        ("comparison (ge)", lambda: torch.ge(scores, 0.5)),
        ("table look-up (index_select)", lambda: holds.index_select(0, bins)),
        ("histogram (bincount, int32)", lambda: torch.bincount(bins, minlength=rows * 4098)),
        ("positions of the flagged items (nonzero, 2.5 % set)", lambda: torch.nonzero(flags)),
        ("binary search among 100 thresholds (searchsorted)",
         lambda: torch.searchsorted(torch.linspace(0, 1, 100).expand(rows, 100).contiguous(), scores)),
    ]
    costs = []
    for name, operation in operations:
        operation()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            operation()
            times.append(time.perf_counter() - start)
        costs.append((name, statistics.median(times) / (rows * columns) * 1e9))
    return costs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--queries", type=int, default=2_000, help="the query/gallery rows' queries")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dry-run", action="store_true", help="N = 600, d = 16, one repeat")
    args = parser.parse_args(argv)
    if args.dry_run:
        args.n, args.dim, args.queries, args.repeats, args.threads = 600, 16, 100, 1, [1]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, load average {load}; N = {args.n}, d = {args.dim}; "
          f"medians of {args.repeats}\n")
    embeddings, labels = make_data(args.n, args.dim, 10, 10, 1.5)
    print("| labels | queries | threads | product (s) | ranklit (s) | x product | counting (s) | tie check (s) "
          "| rest (s) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for threads in args.threads:
        torch.set_num_threads(threads)
        for kind, kind_labels in (("flat", labels[:, 0]), ("2-level", labels)):
            for queries in (0, args.queries):
                total, product, counting, check = split(embeddings, kind_labels, queries, args.repeats)
                who = f"{queries} vs {args.n - queries}" if queries else f"all {args.n}"
                print(f"| {kind} | {who} | {threads} | {product:.3f} | {total:.3f} | {total / product:.2f} | "
                      f"{counting:.3f} | {check:.3f} | {total - product - counting - check:.3f} |", flush=True)
    torch.set_num_threads(1)
    print("\n| operation (one thread, a 2^18-score tile) | ns per item |\n|---|---:|")
    for name, cost in operation_costs(2**18 if not args.dry_run else 2**12, max(args.repeats, 3)):
        print(f"| {name} | {cost:.2f} |")


if __name__ == "__main__":
    main()
