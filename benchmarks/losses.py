"""Time and peak memory of every AP-family loss, forward + backward, against naive B x B x B smooth-rank losses.

Usage::

    python benchmarks/losses.py                      # B in 128 .. 4096, every loss (a few minutes on 2 cores)
    python benchmarks/losses.py --quick              # B in {128, 256}, fewer repetitions
    python benchmarks/losses.py --sizes 256 1024 --losses SupAPLoss ROADMAPLoss --threads 2

Batches are P x K with K = 4, d = 512, L2-normalised float32 embeddings, labels ``arange(B/4)`` repeated 4 times.
Each (loss, implementation, B) runs in a forked child process (no shared allocator state). Peak memory is the
resident-set high-water mark of that child (``VmHWM`` from ``/proc/self/status``, reset through
``/proc/self/clear_refs`` after the inputs are built) minus its resident set at that point: the extra memory the
first forward + backward pass touches (after a warm-up pass on 8 items, so lazy initialisation and the autograd
threads are not counted). Time is the median of the following forward + backward passes.

The naive implementations below are written like the papers' code (Smooth-AP, ROADMAP): they build the full
``B x B x B`` tensor of score differences. They are skipped ("skipped") when that would exceed ``--naive-limit-gb``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import statistics
import time
from collections.abc import Callable

import torch
from torch import Tensor

SIZES = (128, 256, 512, 1024, 2048, 4096)
K, DIM = 4, 512
NAIVE = {"SmoothAPLoss", "SupAPLoss", "ROADMAPLoss", "HAPLoss"}
HIERARCHICAL = {"HAPLoss"}  # labels [fine, fine // 8]: 8 classes (32 items) per coarse class


def _naive_smooth_rank(emb: Tensor, labels: Tensor, supap: bool) -> Tensor:
    """Smooth-AP / SupAP the papers' way: a [B, B, B] tensor of differences (query excluded, as in ranklit)."""
    tau, rho, delta = 0.01, 100.0, 0.05
    batch = emb.shape[0]
    scores = emb @ emb.T
    not_self = ~torch.eye(batch, dtype=torch.bool)
    pos = (labels[:, None] == labels[None, :]) & not_self
    neg = ~pos & not_self
    diff = scores[:, None, :] - scores[:, :, None]  # [q, k, j] = s_qj - s_qk
    others = not_self[None, :, :] & not_self[:, None, :]  # j != k and j != q
    if supap:
        exact = (diff.detach() >= 0).to(diff.dtype)
        rank_pos = 1 + (exact * (pos[:, None, :] & others)).sum(-1)
        sig = torch.sigmoid((diff / tau).clamp(-50, 50))
        linear = rho * (diff - delta) + torch.sigmoid(torch.tensor(delta / tau)) + 0.5
        upper = torch.where(diff <= 0, sig, torch.where(diff <= delta, sig + 0.5, linear))
        rank = rank_pos + (upper * neg[:, None, :]).sum(-1)
    else:
        sig = torch.sigmoid((diff / tau).clamp(-50, 50)) * others
        rank_pos = 1 + (sig * pos[:, None, :]).sum(-1)
        rank = 1 + sig.sum(-1)
    ap = (rank_pos / rank * pos).sum(1) / pos.sum(1)
    return 1 - ap.mean()


def _naive_roadmap(emb: Tensor, labels: Tensor) -> Tensor:
    scores = emb @ emb.T
    not_self = ~torch.eye(emb.shape[0], dtype=torch.bool)
    pos = (labels[:, None] == labels[None, :]) & not_self
    neg = ~pos & not_self
    calib = ((0.9 - scores).clamp(min=0) * pos).sum(1) / pos.sum(1)
    calib = calib + ((scores - 0.6).clamp(min=0) * neg).sum(1) / neg.sum(1)
    return 0.5 * _naive_smooth_rank(emb, labels, supap=True) + 0.5 * calib.mean()


def _naive_hap(emb: Tensor, labels: Tensor) -> Tensor:
    """H-AP surrogate (HAPPIER Eq. 5) the authors' way: a [B, B, B] tensor of differences (query excluded)."""
    from ranklit.functional.inputs import levels_between
    from ranklit.functional.ranking import heaviside, linear_lower_step, supap_upper_step
    from ranklit.functional.relevance import relevance

    scores = emb @ emb.T
    not_self = ~torch.eye(emb.shape[0], dtype=torch.bool)
    levels = levels_between(labels, labels)
    rel = relevance(levels, labels.shape[1], valid=not_self).to(scores.dtype)
    diff = scores[:, None, :] - scores[:, :, None]  # [q, k, j] = s_qj - s_qk
    others = not_self[None, :, :] & not_self[:, None, :]  # j != k and j != q
    level_k, level_j = levels[:, :, None], levels[:, None, :]
    exact = heaviside(diff.detach())
    rank = 1 + (torch.where(level_j < level_k, supap_upper_step(diff, 0.01, 100.0, 0.05), exact) * others).sum(-1)
    hrank_steps = torch.where(level_j > level_k, linear_lower_step(diff, 10.0, 25.0, 0.5), exact)
    hrank = rel + (torch.minimum(rel[:, :, None], rel[:, None, :]) * others * hrank_steps).sum(-1)
    relevant = (levels > 0) & not_self
    return 1 - ((hrank / rank * relevant).sum(1) / (rel * relevant).sum(1)).mean()


def _make_loss(name: str, impl: str, batch: int) -> Callable[[Tensor, Tensor], Tensor]:
    if name in HIERARCHICAL:
        import ranklit.losses as losses

        fn = _naive_hap if impl == "naive" else getattr(losses, name)()
        return lambda e, y: fn(e, torch.stack([y, y // 8], dim=1))
    if impl == "naive":
        if name == "ROADMAPLoss":
            return _naive_roadmap
        return lambda e, y: _naive_smooth_rank(e, y, supap=name == "SupAPLoss")
    import ranklit.losses as losses

    cls = getattr(losses, name)
    module = cls(batch // K, DIM) if name in ("NormSoftmaxLoss", "ProxyNCAPPLoss") else cls()
    return module


def _memory_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _measure(name: str, impl: str, batch: int, reps: int, queue: multiprocessing.Queue) -> None:
    torch.manual_seed(0)
    emb = torch.nn.functional.normalize(torch.randn(batch, DIM), dim=1).requires_grad_()
    labels = torch.arange(batch // K).repeat_interleave(K)
    loss_fn = _make_loss(name, impl, batch)
    loss_fn(emb[: 2 * K], labels[: 2 * K]).backward()  # warm-up: lazy initialisation, autograd threads
    emb.grad = None
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # reset the high-water mark to the current resident set
    base = _memory_kb("VmRSS")
    loss_fn(emb, labels).backward()
    peak_mb = (_memory_kb("VmHWM") - base) / 1024
    times = []
    for _ in range(reps):
        emb.grad = None
        start = time.perf_counter()
        loss_fn(emb, labels).backward()
        times.append(time.perf_counter() - start)
    queue.put((statistics.median(times) * 1000, peak_mb))


def _run(name: str, impl: str, batch: int, reps: int) -> tuple[float, float] | None:
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_measure, args=(name, impl, batch, reps, queue))
    proc.start()
    proc.join()
    return queue.get() if proc.exitcode == 0 else None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="batch sizes B (multiples of 4)")
    parser.add_argument("--losses", nargs="+", default=None, help="loss class names (default: all)")
    parser.add_argument("--quick", action="store_true", help="B in {128, 256}, 3 timed repetitions")
    parser.add_argument("--naive-limit-gb", type=float, default=6.0, help="skip naive runs above this estimate")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: stable on a shared CPU)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    sizes = [128, 256] if args.quick else args.sizes
    names = args.losses or [
        "SmoothAPLoss", "SupAPLoss", "CalibrationLoss", "ROADMAPLoss", "FastAPLoss", "SoftBinAPLoss",
        "BlackBoxAPLoss", "ContrastiveLoss", "TripletLoss", "NormSoftmaxLoss", "ProxyNCAPPLoss",
        "HAPLoss",
    ]
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"{torch.get_num_threads()} threads; d = {DIM}, K = {K}; forward + backward")
    print("| loss | B | ranklit ms | ranklit peak MB | naive ms | naive peak MB | speed-up | memory ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in names:
        for batch in sizes:
            reps = 3 if args.quick else (7 if batch <= 256 else 5 if batch <= 1024 else 3)
            ours = _run(name, "ranklit", batch, reps)
            row = [name, str(batch)] + ([f"{ours[0]:.1f}", f"{ours[1]:.1f}"] if ours else ["failed", "failed"])
            if name not in NAIVE:
                row += ["—"] * 4
            elif 4 * 8 * batch**3 > args.naive_limit_gb * 2**30:
                row += ["skipped"] * 2 + ["—"] * 2
            else:
                naive = _run(name, "naive", batch, min(reps, 3))
                if naive and ours:
                    row += [f"{naive[0]:.1f}", f"{naive[1]:.1f}", f"{naive[0] / ours[0]:.1f}x"]
                    row += [f"{naive[1] / max(ours[1], 0.1):.1f}x"]
                else:
                    row += ["failed"] * 4
            print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
