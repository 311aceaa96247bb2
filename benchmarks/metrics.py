"""Time and peak memory of ranklit's exact retrieval metrics, next to pytorch-metric-learning and torchmetrics.

Every measurement runs in a fresh subprocess on the same synthetic data (class centres on the sphere, items = centre +
Gaussian noise, L2-normalised; 2-level labels group ``--per-coarse`` fine classes under one coarse class):

* ``product``: the bare score matrix ``E @ E.T`` (computed block by block and discarded when it would not fit in
  memory). No exact method can be faster: it is the floor.
* ``ranklit``: :func:`ranklit.functional.retrieval_metrics` (mAP, mAP@R, P@1, R@{1,2,4,8}, R-precision, MRR,
  NDCG@10, all from one ranking pass; with 2-level labels also H-AP, ASI, NDCG and the per-level metrics), under the
  tie policy ``--ties`` (default ``pessimistic``; ``average``/``optimistic`` count twice per positive).
* ``pml``: pytorch-metric-learning's ``AccuracyCalculator`` (mAP@R, P@1 and R@k over a faiss-cpu k-NN with
  ``k = max_bin_count``, the query excluded).
* ``torchmetrics``: ``RetrievalMAP`` on the ``N (N - 1)`` (query, item) pairs, only where they fit in a quarter of the
  free memory (scores shifted by +2: since torchmetrics 1.8 a score <= 0 counts as not retrieved).

Peak memory is the growth of the subprocess's resident set (``VmHWM`` after the method minus ``VmRSS`` before).
Reproduce the table of ``benchmarks/RESULTS.md`` with::

    python benchmarks/metrics.py --sizes 10000 --dim 128 --labels flat --repeats 3
    python benchmarks/metrics.py --sizes 10000 --dim 512 --labels flat 2level --repeats 3
    python benchmarks/metrics.py --sizes 50000 100000 --dim 512 --labels flat --repeats 1

``--ddp 1 2`` measures instead ``RetrievalMetrics.compute()`` (the gather of the states included) under CPU DDP with
1 and 2 processes (gloo, one thread each), every process holding every other item as DistributedSampler would, with
ids: under DDP each process computes a disjoint share of the score tiles, so the 2-process time should be at
most 0.6x the 1-process one, with identical values::

    python benchmarks/metrics.py --sizes 20000 --dim 128 --labels flat --ddp 1 2 --repeats 3

``--tied 0 0.33`` measures the same evaluation with that share of the items mapped to one identical embedding (the
first item's, at evenly spaced positions, across classes: a collapsed model), whose scores tie in every row: the
engine's cost on heavily tied scores against untied ones, the check of the tie warning included (which warns on the
tied set, and there also evaluates its sampled queries under the three policies)::

    python benchmarks/metrics.py --sizes 5000 --dim 128 --labels flat 2level --tied 0 0.33 --methods product ranklit
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing as mp
import os
import statistics
import time
from typing import Any

import torch

METHODS = ("product", "ranklit", "pml", "torchmetrics")


def make_data(
    n: int, dim: int, per_class: int, per_coarse: int, noise: float, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """``[n, dim]`` normalised float32 embeddings and ``[n, 2]`` labels (fine, coarse)."""
    g = torch.Generator().manual_seed(seed)
    num_fine = max(1, n // per_class)
    num_coarse = max(1, num_fine // per_coarse)
    coarse_centres = torch.nn.functional.normalize(torch.randn(num_coarse, dim, generator=g), dim=1)
    fine_to_coarse = torch.arange(num_fine) % num_coarse
    fine_centres = coarse_centres[fine_to_coarse] + 0.8 * torch.randn(num_fine, dim, generator=g) / dim**0.5
    fine_centres = torch.nn.functional.normalize(fine_centres, dim=1)
    fine = torch.randint(0, num_fine, (n,), generator=g)
    embeddings = fine_centres[fine] + noise * torch.randn(n, dim, generator=g) / dim**0.5
    return torch.nn.functional.normalize(embeddings, dim=1), torch.stack([fine, fine_to_coarse[fine]], 1)


def collapse(embeddings: torch.Tensor, share: float) -> torch.Tensor:
    """``embeddings`` with ``share`` of its rows, at evenly spaced positions, replaced by the first row."""
    count = round(share * embeddings.shape[0])
    if count == 0:
        return embeddings
    out = embeddings.clone()
    out[torch.arange(count) * embeddings.shape[0] // count] = embeddings[0]
    return out


def _rss(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    return 0


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current resident set (Linux >= 4.0)
    except OSError:
        pass


def _split(embeddings: torch.Tensor, labels: torch.Tensor, num_queries: int | None) -> tuple[torch.Tensor, ...]:
    """``(queries, query_labels, gallery, gallery_labels)``; without a split every item is a query and the gallery."""
    if num_queries is None:
        return embeddings, labels, embeddings, labels
    return embeddings[:num_queries], labels[:num_queries], embeddings[num_queries:], labels[num_queries:]


def _product(embeddings: torch.Tensor, labels: torch.Tensor, num_queries: int | None) -> dict[str, float]:
    queries, _, gallery, _ = _split(embeddings, labels, num_queries)
    block = max(1, min(queries.shape[0], 2**28 // gallery.shape[0]))  # <= 1 GiB of scores at a time
    refs_t = gallery.T.contiguous()
    for rows in queries.split(block):
        rows @ refs_t
    return {}


def _ranklit(embeddings: torch.Tensor, labels: torch.Tensor, num_queries: int | None) -> dict[str, float]:
    from ranklit.functional import retrieval_metrics

    ties = os.environ.get("RANKLIT_BENCHMARK_TIES", "pessimistic")
    if num_queries is None:
        return retrieval_metrics(embeddings, labels, recall_at=(1, 2, 4, 8), ties=ties)
    queries, query_labels, gallery, gallery_labels = _split(embeddings, labels, num_queries)
    return retrieval_metrics(
        queries, query_labels, ref_embeddings=gallery, ref_labels=gallery_labels, recall_at=(1, 2, 4, 8), ties=ties
    )


def _pml(embeddings: torch.Tensor, labels: torch.Tensor, num_queries: int | None) -> dict[str, float]:
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

    class WithRecall(AccuracyCalculator):
        """Adds deep-metric-learning Recall@k (some positive among the k nearest) over the same k-NN."""

        def calculate_recall_at_k(self, knn_labels, query_labels, not_lone_query_mask, **kwargs):
            # only queries with a positive, as ranklit
            hits = (knn_labels == query_labels[:, None])[not_lone_query_mask]
            return {k: float(hits[:, :k].any(1).float().mean()) for k in (1, 2, 4, 8)}

        def requires_knn(self):
            return [*super().requires_knn(), "recall_at_k"]

    calculator = WithRecall(
        include=("mean_average_precision_at_r", "precision_at_1", "recall_at_k"),
        k="max_bin_count",
        device=torch.device("cpu"),
    )
    fine = labels if labels.ndim == 1 else labels[:, 0]
    if num_queries is None:
        out = calculator.get_accuracy(embeddings, fine)
    else:
        queries, query_labels, gallery, gallery_labels = _split(embeddings, fine, num_queries)
        out = calculator.get_accuracy(queries, query_labels, gallery, gallery_labels, ref_includes_query=False)
    result = {"map_at_r": out["mean_average_precision_at_r"], "precision_at_1": out["precision_at_1"]}
    result.update({f"recall_at_{k}": v for k, v in out["recall_at_k"].items()})
    return result


def _torchmetrics(embeddings: torch.Tensor, labels: torch.Tensor, num_queries: int | None) -> dict[str, float]:
    from torchmetrics.retrieval import RetrievalMAP

    n = embeddings.shape[0]
    fine = labels if labels.ndim == 1 else labels[:, 0]
    scores = embeddings @ embeddings.T + 2.0
    off_diagonal = ~torch.eye(n, dtype=torch.bool)
    preds = scores[off_diagonal]
    del scores
    target = (fine[:, None] == fine[None, :])[off_diagonal]
    indexes = torch.arange(n)[:, None].expand(n, n)[off_diagonal]
    metric = RetrievalMAP(empty_target_action="skip")
    return {"map": float(metric(preds, target, indexes=indexes))}


_FUNCTIONS = {"product": _product, "ranklit": _ranklit, "pml": _pml, "torchmetrics": _torchmetrics}


def _available(method: str) -> bool:
    if method == "pml":
        try:
            import faiss  # noqa: F401
            import pytorch_metric_learning  # noqa: F401
        except ImportError:
            return False
    return True


def _fits(method: str, n: int) -> bool:
    if method != "torchmetrics":
        return True
    needed = 40 * n * n  # scores, preds, target, int64 indexes and torchmetrics' sort buffers
    return needed < os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 4


def _measure(method: str, config: dict[str, Any], repeats: int, queue: Any) -> None:
    if config["threads"]:
        torch.set_num_threads(config["threads"])
        if method == "pml":
            import faiss

            faiss.omp_set_num_threads(config["threads"])
    keys = ("n", "dim", "per_class", "per_coarse", "noise")
    embeddings, labels = make_data(*(config[key] for key in keys))
    embeddings = collapse(embeddings, config["tied"])
    if config["labels"] == "flat":
        labels = labels[:, 0]
    times, peaks, values = [], [], {}
    for _ in range(1 if method == "torchmetrics" else repeats):  # minutes per run: measured once
        before = _rss("VmRSS:")
        _reset_peak()
        start = time.perf_counter()
        values = _FUNCTIONS[method](embeddings, labels, config["num_queries"])
        times.append(time.perf_counter() - start)
        peaks.append(max(0, _rss("VmHWM:") - before))
    queue.put((statistics.median(times), max(peaks), {k: float(v) for k, v in values.items()}))


def run(method: str, config: dict[str, Any], repeats: int, timeout: float) -> tuple[float, int, dict[str, float]] | str:
    """Measure one method in a fresh process; a string says why it was not run or did not finish."""
    if not _available(method):
        return "not installed"
    if not _fits(method, config["n"]):
        return "does not fit in memory"
    if method == "torchmetrics" and (config["labels"] != "flat" or config["num_queries"] is not None):
        return "flat labels, no gallery only"
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    process = ctx.Process(target=_measure, args=(method, config, repeats, queue))
    process.start()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            result = queue.get(timeout=1.0)
        except Exception:  # queue.Empty: still running, or the process died without a result
            if not process.is_alive():
                return f"failed (exit code {process.exitcode})"
            continue
        process.join()
        return result
    process.kill()
    return f"over {timeout:.0f} s"


def _ddp_worker(rank: int, world_size: int, port: int, config: dict[str, Any], repeats: int, queue: Any) -> None:
    import torch.distributed as dist

    from ranklit.metrics import RetrievalMetrics

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
    try:
        keys = ("n", "dim", "per_class", "per_coarse", "noise")
        embeddings, labels = make_data(*(config[key] for key in keys))
        if config["labels"] == "flat":
            labels = labels[:, 0]
        mine = torch.arange(rank, config["n"], world_size)  # DistributedSampler's split (no shuffle)
        times, values = [], {}
        for _ in range(repeats):
            metric = RetrievalMetrics(recall_at=(1, 2, 4, 8), ties=config["ties"])
            for batch in mine.split(256):
                metric.update(embeddings[batch], labels[batch], batch)
            dist.barrier()
            start = time.perf_counter()
            values = metric.compute()
            elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest process sets the time
            times.append(float(elapsed))
        if rank == 0:
            queue.put((statistics.median(times), {k: float(v) for k, v in values.items()}))
    finally:
        dist.destroy_process_group()


def run_ddp(world_size: int, config: dict[str, Any], repeats: int, timeout: float) -> tuple[float, dict] | str:
    """Median ``RetrievalMetrics.compute()`` time with ``world_size`` CPU processes, and rank 0's values."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    processes = [
        ctx.Process(target=_ddp_worker, args=(rank, world_size, port, config, repeats, queue))
        for rank in range(world_size)
    ]
    for process in processes:
        process.start()
    try:
        result = queue.get(timeout=timeout)
    except Exception:  # queue.Empty: too slow, or a process died
        result = f"no result within {timeout:.0f} s (exit codes {[p.exitcode for p in processes]})"
    for process in processes:
        process.join(timeout=60)
        if process.is_alive():
            process.kill()
    return result


def main_ddp(args: argparse.Namespace) -> None:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"torch {torch.__version__}, 1 thread per process, {os.cpu_count()} CPUs, load average {load}")
    print("| N | d | labels | processes | compute time (s) | x 1 process | values |")
    print("|---|---|---|---|---|---|---|")
    for n in args.sizes:
        for label_kind in args.labels:
            config = dict(n=n, dim=args.dim, labels=label_kind, per_class=args.per_class,
                          per_coarse=args.per_coarse, noise=args.noise, ties=args.ties)
            reference: tuple[float, dict] | None = None
            for world_size in args.ddp:
                result = run_ddp(world_size, config, args.repeats, args.timeout)
                if isinstance(result, str):
                    print(f"| {n} | {args.dim} | {label_kind} | {world_size} | {result} | | |", flush=True)
                    continue
                seconds, values = result
                reference = reference or result
                ratio = seconds / reference[0]
                gap = max(abs(v - reference[1][k]) / max(abs(reference[1][k]), 1e-300) for k, v in values.items())
                same = "identical to the first row" if values == reference[1] else f"max relative gap {gap:.1e}"
                if values is reference[1]:
                    same = ", ".join(f"{k} {v:.6f}" for k, v in values.items() if "level" not in k)
                print(f"| {n} | {args.dim} | {label_kind} | {world_size} | {seconds:.3f} | {ratio:.2f} | {same} |",
                      flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 50000, 100000])
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--labels", nargs="+", choices=("flat", "2level"), default=["flat", "2level"])
    parser.add_argument("--per-class", type=int, default=10, help="mean images per fine class")
    parser.add_argument("--per-coarse", type=int, default=10, help="fine classes per coarse class")
    parser.add_argument("--noise", type=float, default=1.5, help="noise norm relative to the class-centre norm")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument(
        "--query-fraction", type=float, default=None,
        help="query/gallery evaluation: this fraction of the items are the queries, the rest the gallery "
        "(default: every item ranks all the others)",
    )
    parser.add_argument(
        "--queries", type=int, nargs="+", default=[0], metavar="Q",
        help="for each Q > 0 also time a query/gallery evaluation: Q more items (same distribution) query a gallery "
        "of the N items; 0 = the N items rank each other (default: 0 only)",
    )
    parser.add_argument("--threads", type=int, default=0, help="torch/faiss threads (0 = their default)")
    parser.add_argument("--ties", choices=("pessimistic", "average", "optimistic"), default="pessimistic",
                        help="ranklit's tie policy")
    parser.add_argument("--tied", type=float, nargs="+", default=[0.0], metavar="SHARE",
                        help="for each SHARE, that share of the items mapped to one identical embedding (default 0)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per method and configuration")
    parser.add_argument(
        "--ddp", type=int, nargs="+", default=None, metavar="PROCESSES",
        help="time RetrievalMetrics.compute() under CPU DDP with these numbers of processes instead (e.g. 1 2)",
    )
    args = parser.parse_args()
    os.environ["RANKLIT_BENCHMARK_TIES"] = args.ties  # read by the spawned measuring processes
    if args.ddp:
        main_ddp(args)
        return
    threads = args.threads or torch.get_num_threads()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"torch {torch.__version__}, {threads} threads, {os.cpu_count()} CPUs, load average {load}")
    print("| N | d | labels | method | median time (s) | × product | peak memory (MiB) | values |")
    print("|---|---|---|---|---|---|---|---|")
    for n, extra, label_kind, tied in itertools.product(args.sizes, args.queries, args.labels, args.tied):
        if extra > 0:  # `extra` queries against a gallery of `n`
            config = dict(n=n + extra, num_queries=extra)
        else:
            fraction = args.query_fraction
            config = dict(n=n, num_queries=None if fraction is None else max(1, round(fraction * n)))
        config.update(dim=args.dim, labels=label_kind, per_class=args.per_class, per_coarse=args.per_coarse,
                      noise=args.noise, threads=args.threads, tied=tied)
        if tied:
            label_kind = f"{label_kind}, {tied:.0%} identical"
        if config["num_queries"] is not None:
            label_kind = f"{label_kind}, {config['num_queries']} queries vs {config['n'] - config['num_queries']}"
        floor = None
        for method in args.methods:
            result = run(method, config, args.repeats, args.timeout)
            if isinstance(result, str):
                print(f"| {n} | {args.dim} | {label_kind} | {method} | {result} | | | |", flush=True)
                continue
            seconds, peak, values = result
            floor = seconds if method == "product" else floor
            ratio = f"{seconds / floor:.2f}" if floor else ""
            shown = ", ".join(
                f"{k} {v:.6f}" for k, v in values.items() if not k.startswith("num_") and "level" not in k
            )
            row = f"{n} | {args.dim} | {label_kind} | {method} | {seconds:.3f} | {ratio} | {peak / 2**20:.0f}"
            print(f"| {row} | {shown} |", flush=True)


if __name__ == "__main__":
    main()
