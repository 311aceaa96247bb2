"""Everything to measure on the first GPU ranklit meets, in one command; ``--dry-run`` runs it all on the CPU, tiny.

Usage::

    python benchmarks/gpu.py                          # on a CUDA machine: writes its section into benchmarks/RESULTS.md
    python benchmarks/gpu.py --dry-run                # CPU, tiny sizes, prints the tables (what the test suite runs)
    python benchmarks/gpu.py --dry-run --results /tmp/RESULTS.md   # ... and writes them into that file

Four tables, each timed as the median of ``--repeat`` runs after a warm-up, with ``torch.cuda.synchronize``:

1. **Metrics** at N = 136,000 items, d = 512 (the size of the iNaturalist 2018 test set; about 3,400 classes of
   40 images, 8 coarse groups for H-AP), every item a query against all others, and a quarter of them against the
   rest (query/gallery): ranklit's ``retrieval_metric_tensors`` (flat: mAP, mAP@R, R@k; hierarchical: + H-AP, ASI,
   NDCG; on CUDA its counts come from the Triton kernel) against the bare score product (``q @ E.T`` chunk by chunk)
   and torchmetrics' ``RetrievalMAP`` on a sample of queries (its input is the flat ``Q x N`` score list, so all
   queries at once do not fit), extrapolated to N queries; both mAPs on that sample are printed as a check. Each
   row has its hardware floor (FLOPs over the measured float32 matrix rate, bytes over the measured copy bandwidth)
   and the figure ``benchmarks/RESULTS.md`` held before the run.
2. **Losses**: SupAP, H-AP and Smooth-AP forward + backward at B = 384 to 16,384 (d = 512, P x 4 batches), on each
   engine (``engine="triton"``: the fused kernels; ``"torch"``), time and peak GPU memory
   (``torch.cuda.max_memory_allocated`` above what the inputs hold); "OOM" when it does not fit. Each row has its
   hardware floor (:func:`loss_floor_ms`: FLOPs and bytes over the float32 matrix rate and the copy bandwidth measured
   first, :func:`hardware_rates`), the measured time over it, and the figure of the same row in the RESULTS.md section
   this run replaces. The kernel rows are never skipped; on the torch engine a size whose time, estimated as B^3 from
   the last size measured, exceeds 20 s is skipped and says so (HAPLoss's coarse level has B / 8 positives per query,
   so its B x P x B smooth ranks grow as B^3).
3. **Training step** of a ResNet-50 at 224 px (batch 128, SGD): the network alone (loss = a sum of the embeddings),
   with ROADMAPLoss, and with ROADMAPLoss + ``RetrievalMetrics.update``; float32 against bf16 autocast, and bf16 with
   channels-last.

The dry run uses N = 600, d = 16, B in {32, 64}, ``test_resnet`` at 32 px, batch 8, and names the device "CPU" (the
kernel rows say "not run": the kernels need CUDA). Not 16 px: there ``layer4``'s first (stride-2, padded) convolution
sees 1 x 1 inputs, and PyTorch's oneDNN CPU kernel (torch 2.14) returns NaN weight gradients for it under bf16 autocast
in about one draw of three (none with ``torch.backends.mkldnn`` off, none at 2 x 2): a PyTorch bug, not ranklit's.
"""

from __future__ import annotations

import argparse
import math
import platform
import re
import statistics
import time
from collections.abc import Callable
from contextlib import nullcontext
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

RESULTS = Path(__file__).with_name("RESULTS.md")
START, END = "<!-- benchmarks/gpu.py: start -->", "<!-- benchmarks/gpu.py: end -->"
FULL = dict(n=136_000, dim=512, classes=3_400, sample=512, sizes=(384, 1024, 4096, 16384), net="resnet50",
            image=224, batch=128, loss_budget_s=20.0)
DRY = dict(n=600, dim=16, classes=30, sample=32, sizes=(32, 64), net="test_resnet", image=32, batch=8,
           loss_budget_s=60.0)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _median_time(fn: Callable[[], Any], device: torch.device, repeat: int) -> float:
    fn()  # warm-up (kernel selection, allocator)
    times = []
    for _ in range(repeat):
        _sync(device)
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _peak_bytes(fn: Callable[[], Any], device: torch.device) -> int | None:
    if device.type != "cuda":
        return None
    _sync(device)
    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
    fn()
    _sync(device)
    return torch.cuda.max_memory_allocated(device) - base


def _mib(value: int | None) -> str:
    return "n/a (CPU)" if value is None else f"{value / 2**20:,.0f}"


def _embeddings(n: int, dim: int, classes: int, device: torch.device) -> tuple[Tensor, Tensor]:
    generator = torch.Generator().manual_seed(0)
    fine = torch.randperm(n, generator=generator) % classes
    centres = torch.randn(classes, dim, generator=generator)
    embeddings = centres[fine] + 1.5 * torch.randn(n, dim, generator=generator)
    labels = torch.stack([fine, fine % 8], 1)  # [species-like, one of 8 coarse groups]
    return torch.nn.functional.normalize(embeddings, dim=1).to(device), labels.to(device)


def _previous_seconds(label: str) -> str:
    """The seconds recorded for a row of the metrics table in ``benchmarks/RESULTS.md`` (``—`` where none)."""
    text = RESULTS.read_text() if RESULTS.exists() else ""
    found = re.search(r"^\| " + re.escape(label) + r" \| ([0-9.,]+) \|", text, flags=re.M)
    return found.group(1) if found else "—"


def metrics_table(size: dict[str, Any], device: torch.device, repeat: int) -> list[str]:
    """Each row against its hardware floor: ``max(FLOPs / matrix rate, bytes / copy bandwidth)``, FLOPs = the
    ``2 Q N d`` of the score product, bytes = the embeddings read once (the counts' kernel never writes the
    ``Q x N`` scores; the bare product's floor counts them written once)."""
    from torchmetrics.retrieval import RetrievalMAP

    from ranklit.functional.metrics._retrieval import retrieval_metric_tensors

    embeddings, labels = _embeddings(size["n"], size["dim"], size["classes"], device)
    n, dim, sample = embeddings.shape[0], embeddings.shape[1], size["sample"]
    rate, bandwidth = hardware_rates(device, size is DRY)

    def floor(queries: int, refs: int, written: int = 0) -> float:
        return max(2 * queries * refs * dim / rate, (4 * (queries + refs) * dim + written) / bandwidth)

    def bare() -> None:
        for chunk in embeddings.split(4096):
            (chunk @ embeddings.T).max()

    queries = torch.arange(sample, device=device)
    scores = embeddings[:sample] @ embeddings.T
    scores[queries, queries] = -math.inf  # the query itself is not retrieved
    target = labels[:sample, :1] == labels[None, :, 0]
    target[queries, queries] = False
    indexes = queries[:, None].expand_as(scores)

    def torchmetrics_sample() -> Tensor:
        return RetrievalMAP()(scores.flatten(), target.flatten(), indexes=indexes.flatten())

    def row(label: str, seconds: float, floor_s: float, check: str = "—") -> str:
        return (f"| {label} | {seconds:.3f} | {floor_s:.3f} | {seconds / floor_s:.1f} | {_previous_seconds(label)} "
                f"| {check} |")

    split = n // 4  # query/gallery: a quarter of the items query the other three quarters
    cases = (
        ("flat", n, n, lambda: retrieval_metric_tensors(embeddings, labels[:, 0])),
        ("hierarchical (2 levels)", n, n, lambda: retrieval_metric_tensors(embeddings, labels)),
        (f"flat, query/gallery ({split:,} x {n - split:,})", split, n - split,
         lambda: retrieval_metric_tensors(embeddings[:split], labels[:split, 0], ref_embeddings=embeddings[split:],
                                          ref_labels=labels[split:, 0])),
    )
    rows = [row(f"bare product `q @ E.T` (N = {n:,})", _median_time(bare, device, repeat), floor(n, n, 4 * n * n))]
    for name, num_queries, num_refs, evaluate in cases:
        rows.append(row(f"ranklit `retrieval_metric_tensors`, {name}", _median_time(evaluate, device, repeat),
                        floor(num_queries, num_refs)))
    per_query = retrieval_metric_tensors(embeddings[:sample], labels[:sample, 0], ref_embeddings=embeddings,
                                         ref_labels=labels[:, 0], ids=queries, ref_ids=torch.arange(n, device=device),
                                         per_query=True)
    tm_seconds = _median_time(torchmetrics_sample, device, repeat) * n / sample
    rows.append(row(f"torchmetrics `RetrievalMAP`, {sample} queries x {n / sample:.0f}", tm_seconds, floor(n, n),
                    f"{float(torchmetrics_sample()):.6f} vs ranklit {float(per_query['map'].nanmean()):.6f}"))
    engine = "Triton kernel (CUDA)" if device.type == "cuda" else "torch (CPU)"
    return [f"Counting engine: {engine}. Matrix rate {rate / 1e9:,.1f} GFLOP/s (float32 `torch.matmul`), copy "
            f"bandwidth {bandwidth / 1e9:,.1f} GB/s; floor = max(FLOPs / rate, bytes / bandwidth).", "",
            "| metrics over every query | seconds | floor (s) | x floor | previous (s) | mAP of the sampled queries |",
            "|---|---:|---:|---:|---:|---|", *rows]


def _cubic_estimate(last: tuple[int, float], batch: int) -> float:
    """Seconds a loss would take at ``batch`` from its time at a smaller one: the smooth ranks are ``B x P x B`` terms,
    and with HAPLoss's coarse levels ``P`` grows with ``B`` (here B / 8 per coarse group), so the work is up to B^3."""
    return last[1] * (batch / last[0]) ** 3


def hardware_rates(device: torch.device, dry_run: bool) -> tuple[float, float]:
    """``(flop_per_s, bytes_per_s)``: the measured float32 matrix-product rate (TF32 off: plain float32) and copy
    bandwidth (bytes read + written by ``dst.copy_(src)``), the two rates the floors divide by."""
    side, numel = (256, 2**20) if dry_run else (8192, 2**28)
    # constant inputs: no random number is drawn (the training table draws its images from the global state)
    a, b = torch.full((side, side), 0.5, device=device), torch.full((side, side), 0.5, device=device)
    src, dst = torch.empty(numel, device=device), torch.empty(numel, device=device)
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        matmul = _median_time(lambda: a @ b, device, 5)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    copy = _median_time(lambda: dst.copy_(src), device, 5)
    return 2 * side**3 / matmul, 2 * 4 * numel / copy


def loss_floor_ms(batch: int, dim: int, ranked: int, rates: tuple[float, float]) -> float:
    """The hardware floor of one forward + backward, in ms: ``max(FLOPs / matrix rate, bytes / copy bandwidth)``.

    FLOPs: the score product ``2 B^2 d`` and its two gradients ``4 B^2 d``, plus 20 per smooth-step term (10 forward,
    10 backward: difference, scaling, exponential, division, selections) over the ``ranked x B`` terms (``ranked`` =
    the ranked items of all queries). Bytes: the ``B x B`` float32 scores written and read, and their gradient written
    and read (``16 B^2``), plus the embeddings and their gradient (``8 B d``)."""
    flops = 6 * batch * batch * dim + 20 * ranked * batch
    moved = 16 * batch * batch + 8 * batch * dim
    return 1000 * max(flops / rates[0], moved / rates[1])


def previous_loss_figures(path: Path = RESULTS) -> dict[tuple[str, int, str], str]:
    """``(loss, B, engine) -> ms`` of the losses table in ``path``'s GPU section (rows without an engine column,
    from before the Triton engine, are the torch engine's)."""
    text = path.read_text() if path.exists() else ""
    section = text.split(START)[-1].split(END)[0] if START in text else ""
    losses = section.split("### Losses")[-1].split("###")[0] if "### Losses" in section else ""
    figures = {}
    for line in losses.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].endswith("Loss") and cells[1].replace(",", "").isdigit():
            engine, ms = (cells[2], cells[3]) if cells[2] in ("torch", "triton") else ("torch", cells[2])
            figures[(cells[0], int(cells[1].replace(",", "")), engine)] = ms
    return figures


def losses_table(size: dict[str, Any], device: torch.device, repeat: int) -> list[str]:
    from ranklit.functional import smooth_rank_engine
    from ranklit.losses import HAPLoss, SmoothAPLoss, SupAPLoss

    rates = hardware_rates(device, size is DRY)
    previous = previous_loss_figures()
    rows = [f"Floors from the measured float32 matrix rate ({rates[0] / 1e12:.3g} TFLOP/s, TF32 off) and copy "
            f"bandwidth ({rates[1] / 1e9:.3g} GB/s) (`loss_floor_ms`).", "",
            "| loss | B | engine | forward + backward (ms) | peak memory (MiB) | floor (ms) | x floor "
            "| previous (ms) |", "|---|---:|---|---:|---:|---:|---:|---:|"]
    kernels_run = smooth_rank_engine(torch.zeros(1, 1, device=device)) == "triton"
    for name, make in (("SupAPLoss", SupAPLoss), ("HAPLoss", HAPLoss), ("SmoothAPLoss", SmoothAPLoss)):
        for engine in ("triton", "torch"):
            loss_fn = make(engine=engine)
            last: tuple[int, float] | None = None  # (B, seconds) of the last size measured (torch engine: B^3 skip)
            for batch in size["sizes"]:
                head = f"| {name} | {batch:,} | {engine} |"
                before = previous.get((name, batch, engine), "—")
                if engine == "triton" and not kernels_run:
                    rows.append(f"{head} not run: no CUDA device or no Triton | — | — | — | {before} |")
                    continue
                estimate = 0.0 if last is None else _cubic_estimate(last, batch)
                if engine == "torch" and last is not None and estimate > size["loss_budget_s"]:
                    rows.append(f"{head} skipped: about {estimate:,.1f} s from B = {last[0]:,} (B^3 work) | — | — | — "
                                f"| {before} |")
                    continue
                embeddings, labels = _embeddings(batch, size["dim"], batch // 4, device)
                labels = labels if name == "HAPLoss" else labels[:, 0]
                column = 1 if name == "HAPLoss" else 0  # the coarsest level ranks the most items
                same = labels.reshape(batch, -1)[:, column]
                ranked = int((same[:, None] == same[None, :]).sum()) - batch
                floor = loss_floor_ms(batch, size["dim"], ranked, rates)
                leaf = embeddings.requires_grad_(True)

                def step(loss_fn: Any = loss_fn, labels: Tensor = labels, leaf: Tensor = leaf) -> None:
                    loss_fn(leaf, labels).backward()
                    leaf.grad = None

                try:
                    peak = _peak_bytes(step, device)
                    seconds = _median_time(step, device, repeat)
                    rows.append(f"{head} {1000 * seconds:.1f} | {_mib(peak)} | {floor:.2f} | "
                                f"{1000 * seconds / floor:,.0f} | {before} |")
                    last = (batch, seconds)
                except torch.OutOfMemoryError:
                    rows.append(f"{head} OOM | OOM | {floor:.2f} | — | {before} |")
                del embeddings, leaf
                if device.type == "cuda":
                    torch.cuda.empty_cache()
    return rows


def _train_step(net: Any, images: Tensor, labels: Tensor, optimizer: Any, loss_fn: Any, metric: Any, autocast: Any,
                with_loss: bool, with_metric: bool) -> None:
    with autocast:
        embeddings = net(images)
    loss = loss_fn(embeddings, labels) if with_loss else embeddings.float().sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if with_metric:
        metric.update(embeddings.detach(), labels)


def training_table(size: dict[str, Any], device: torch.device, repeat: int) -> list[str]:
    from ranklit.losses import ROADMAPLoss
    from ranklit.metrics import RetrievalMetrics
    from ranklit.models import EmbeddingNet

    batch, side = size["batch"], size["image"]
    torch.manual_seed(0)
    images = torch.randn(batch, 3, side, side, device=device)
    labels = (torch.arange(batch, device=device) // 4).long()
    rows = ["| precision | layout | network only (ms) | + ROADMAPLoss (ms) | + loss + metric update (ms) |",
            "|---|---|---:|---:|---:|"]
    for precision, channels_last in (("fp32", False), ("bf16-mixed", False), ("bf16-mixed", True)):
        torch.manual_seed(0)
        net = EmbeddingNet(size["net"], pretrained=False, embedding_dim=512).to(device)
        layout = torch.channels_last if channels_last else torch.contiguous_format
        net = net.to(memory_format=layout)  # type: ignore[call-overload]
        batch_images = images.contiguous(memory_format=layout)
        optimizer, loss_fn, metric = torch.optim.SGD(net.parameters(), lr=1e-4), ROADMAPLoss(), RetrievalMetrics()
        autocast = torch.autocast(device.type, dtype=torch.bfloat16) if precision != "fp32" else nullcontext()

        parts = (net, batch_images, labels, optimizer, loss_fn, metric, autocast)
        times = [1000 * _median_time(partial(_train_step, *parts, with_loss, with_metric), device, repeat)
                 for with_loss, with_metric in ((False, False), (True, False), (True, True))]
        rows.append(f"| {precision} | {'channels-last' if channels_last else 'NCHW'} | "
                    + " | ".join(f"{t:.1f}" for t in times) + " |")
    return rows


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (CUDA {torch.version.cuda})"
    return f"CPU ({platform.machine()}, dry run)"


def write_section(path: Path, section: str, markers: tuple[str, str] = (START, END)) -> None:
    """Replace the text between the ``markers`` (default: this script's) in ``path`` (or append it, markers
    included)."""
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    start, end = markers
    block = f"{start}\n{section}\n{end}"
    if start in text and end in text:
        text = re.sub(re.escape(start) + r".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny sizes (the test suite's run)")
    parser.add_argument("--repeat", type=int, default=None, help="timed runs per figure (default 5; dry run 1)")
    parser.add_argument("--results", type=Path, default=None,
                        help="file to write the section into (default: benchmarks/RESULTS.md on a GPU; dry run: none)")
    args = parser.parse_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        parser.error("no CUDA device: run it on a GPU machine, or `--dry-run` to check it on the CPU")
    device = torch.device("cpu") if args.dry_run else torch.device("cuda", torch.cuda.current_device())
    size, repeat = (DRY, args.repeat or 1) if args.dry_run else (FULL, args.repeat or 5)
    command = "python benchmarks/gpu.py" + (" --dry-run" if args.dry_run else "")
    date = time.strftime("%Y-%m-%d", time.gmtime())
    header = (f"## GPU (benchmarks/gpu.py)\n\nCommand: `{command}`. Device: **{device_name(device)}**; "
              f"torch {torch.__version__}; {date}; median of {repeat} run(s) after a warm-up.")
    parts = [header]
    for title, table in (("Metrics", metrics_table), ("Losses", losses_table), ("Training step", training_table)):
        print(f"{title} ...", flush=True)
        parts.append(f"### {title}\n\n" + "\n".join(table(size, device, repeat)))
        print(parts[-1], flush=True)  # each table as soon as it is measured (a run cut short keeps the first ones)
    section = "\n\n".join(parts)
    results = args.results if args.results is not None else (None if args.dry_run else RESULTS)
    if results is not None:
        write_section(results, section)
        print(f"written into {results}")
    return section


if __name__ == "__main__":
    main()
