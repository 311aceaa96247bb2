"""Scale benchmark: multistage backprop vs plain backprop (time, peak memory), and the cost of the DDP gather.

    python benchmarks/scale.py                       # CPU defaults: test_resnet, 32 px, batch 1024 in chunks of 128
    python benchmarks/scale.py --device cuda --backbone resnet50 --image-size 224 --batch 1024 --chunk 64

Part 1 runs each configuration in a forked child process and reports the step time (forward + ROADMAP loss +
backward, after a small warm-up step; the best of ``--repeats``) and the peak memory of the step: ``ru_maxrss`` minus
the RSS before the step on CPU, ``torch.cuda.max_memory_allocated`` on CUDA. Multistage backprop runs ``--batch``
images in chunks of ``--chunk``; plain backprop runs ``--plain-batches`` in increasing order until one needs more
memory than the multistage step (the budget; ``--budget-mb`` sets it explicitly): the last batch under the budget is
"the largest batch that fits" in the memory multistage needs for ``--batch``. Plain backprop at ``--batch`` is
measured too (``--no-plain-reference`` skips it), to show the memory multistage saves at equal batch.

Part 2 (CPU, 2 processes, gloo) times a DDP training step with ``--ddp-batch`` images per rank with and without the
gather of the retrieval set (``RetrievalModule(gather=...)``), as the best of ``--ddp-rounds`` interleaved rounds of
``--ddp-steps`` steps (after one warm-up step each), and the gather (forward + backward) alone.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import socket
import time
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ranklit.losses import ROADMAPLoss
from ranklit.models import EmbeddingNet
from ranklit.training import gather_retrieval_set, multistage_backward, ranking_objective


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _batch(size: int, args: argparse.Namespace, device: torch.device) -> tuple[torch.Tensor, ...]:
    images = torch.randn(size, 3, args.image_size, args.image_size, device=device)
    labels = torch.arange(size, device=device) // 4  # P x K batches, K = 4
    return images, labels, torch.arange(size, device=device)


def _step(net: EmbeddingNet, batch: tuple[torch.Tensor, ...], chunk: int | None) -> None:
    images, labels, ids = batch
    loss = ROADMAPLoss()
    net.zero_grad(set_to_none=True)
    if chunk is None:
        ranking_objective(loss, net(images), labels, ids).loss.backward()
    else:
        multistage_backward(net, images, lambda e: ranking_objective(loss, e, labels, ids).loss, chunk)


def _measure(args: argparse.Namespace, batch_size: int, chunk: int | None, queue: Any) -> None:
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    torch.manual_seed(0)
    net = EmbeddingNet(args.backbone, embedding_dim=args.embedding_dim).to(device)
    _step(net, _batch(8, args, device), None)  # warm-up: allocations, kernels selection
    batch = _batch(batch_size, args, device)
    before = _rss_mb()
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        _step(net, batch, chunk)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    if device.type == "cuda":
        peak = (torch.cuda.max_memory_allocated(device) - base) / 2**20
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before
    queue.put({"batch": batch_size, "chunk": chunk, "time_s": min(times), "peak_mb": peak})


def _in_child(args: argparse.Namespace, batch_size: int, chunk: int | None) -> dict[str, Any]:
    context = mp.get_context("fork" if args.device == "cpu" else "spawn")
    queue = context.Queue()
    process = context.Process(target=_measure, args=(args, batch_size, chunk, queue))
    process.start()
    result = queue.get()
    process.join()
    return result


def memory_and_time(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Part 1: the multistage step, then plain steps of growing batches until one exceeds the budget."""
    multistage = _in_child(args, args.batch, args.chunk)
    budget = args.budget_mb or multistage["peak_mb"]
    rows = [multistage]
    for size in args.plain_batches:
        rows.append(_in_child(args, size, None))
        if rows[-1]["peak_mb"] > budget:
            break
    if args.plain_reference and args.batch not in [row["batch"] for row in rows[1:]]:
        rows.append(_in_child(args, args.batch, None))  # what multistage saves at equal batch
    for row in rows:
        row["fits"] = row["peak_mb"] <= budget
    return rows


def _ddp_worker(rank: int, args: argparse.Namespace, port: int, queue: Any) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    torch.manual_seed(0)
    net = DistributedDataParallel(EmbeddingNet(args.backbone, embedding_dim=args.embedding_dim))
    optimizer = torch.optim.SGD(net.parameters(), lr=1e-3)
    images, labels, ids = _batch(args.ddp_batch, args, torch.device("cpu"))
    ids = ids + rank * args.ddp_batch
    result: dict[str, float] = {}
    for gather in (False, True) * args.ddp_rounds:  # interleaved, so load changes of the machine hit both
        times = []
        for _ in range(args.ddp_steps + 1):
            dist.barrier()
            start = time.perf_counter()
            optimizer.zero_grad()
            ranking_objective(ROADMAPLoss(), net(images), labels, ids, gather=gather).loss.backward()
            optimizer.step()
            times.append(time.perf_counter() - start)
        key = "step_gather_s" if gather else "step_local_s"
        result[key] = min(result.get(key, float("inf")), sum(times[1:]) / args.ddp_steps)
    embeddings = torch.nn.functional.normalize(torch.randn(args.ddp_batch, args.embedding_dim), dim=1)
    embeddings.requires_grad_(True)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(20):
        refs, _, _ = gather_retrieval_set(embeddings, labels, ids)
        refs.sum().backward()
    result["gather_only_ms"] = (time.perf_counter() - start) / 20 * 1000
    if rank == 0:
        queue.put(result)
    dist.destroy_process_group()


def gather_overhead(args: argparse.Namespace) -> dict[str, float]:
    """Part 2: 2-process CPU DDP step with and without the gather."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.get_context("fork")
    queue = context.Queue()
    processes = [context.Process(target=_ddp_worker, args=(r, args, port, queue)) for r in range(2)]
    for process in processes:
        process.start()
    result = queue.get()
    for process in processes:
        process.join()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--backbone", default="test_resnet")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--embedding-dim", type=int, default=64)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--chunk", type=int, default=128)
    parser.add_argument("--plain-batches", type=int, nargs="+", default=[128, 256, 512, 1024])
    parser.add_argument("--budget-mb", type=float, default=None)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--plain-reference", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--ddp-batch", type=int, default=128)
    parser.add_argument("--ddp-steps", type=int, default=4)
    parser.add_argument("--ddp-rounds", type=int, default=3)
    parser.add_argument("--skip-ddp", action="store_true")
    args = parser.parse_args()
    start = time.perf_counter()
    rows = memory_and_time(args)
    print("| method | batch | chunk | step time (s) | peak memory (MiB) | within budget |")
    print("|---|---:|---:|---:|---:|---|")
    for row in rows:
        method = "multistage" if row["chunk"] else "plain"
        chunk = row["chunk"] or "-"
        print(f"| {method} | {row['batch']} | {chunk} | {row['time_s']:.2f} | {row['peak_mb']:.0f} | {row['fits']} |")
    if not args.skip_ddp:
        ddp = gather_overhead(args)
        overhead = ddp["step_gather_s"] / ddp["step_local_s"] - 1
        print(json.dumps(ddp), f"gather overhead: {100 * overhead:+.1f}% of the step")
    print(f"total benchmark time: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
