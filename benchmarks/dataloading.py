"""Images per second of the training loader (JPEG decode + RandomResizedCrop + flip + normalise, P x K batches).

Usage::

    python benchmarks/dataloading.py                          # 1,200 JPEGs of 500 x 375, workers 0 / 1 / 2
    python benchmarks/dataloading.py --workers 0 2 4 8 --images 4000 --image-size 224
    python benchmarks/dataloading.py --quick                  # 240 images, workers 0 / 2 (a smoke run)

Generated JPEGs (quality 90, smooth colour fields plus noise, about the size of CUB / SOP photographs) are written
to a temporary directory laid out one folder per class and read with ``ClassFolderDataset``; the loader uses
``PKSampler`` (P x K = 16 x 4) and ``train_transform``. For each worker count the script times two epochs: the
first batch (worker start-up and first decodes) is reported separately, and the throughput is images / second over
the remaining batches. It prints a Markdown table for ``benchmarks/RESULTS.md``. The main process runs torch with
``--threads`` intra-op threads (default 1, as DataLoader workers do): on a small, busy machine the multi-threaded
resize of ``num_workers=0`` is otherwise dominated by thread contention (about 40x slower here).
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import PIL
import torch
import torchvision
from PIL import Image
from torch.utils.data import DataLoader

from ranklit.data import ClassFolderDataset, PKSampler
from ranklit.data.transforms import train_transform


def _write_jpegs(root: Path, images: int, per_class: int, width: int, height: int) -> None:
    """Smooth random colour fields with noise, ``per_class`` per class folder."""
    rng = np.random.default_rng(0)
    for i in range(images):
        coarse = rng.uniform(0, 255, size=(height // 32 + 1, width // 32 + 1, 3)).astype(np.uint8)
        field = np.asarray(Image.fromarray(coarse).resize((width, height), Image.BILINEAR), dtype=np.int16)
        pixels = np.clip(field + rng.integers(-20, 21, size=field.shape), 0, 255).astype(np.uint8)
        path = root / f"class{i // per_class:04d}" / f"{i:06d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels).save(path, "JPEG", quality=90)


def _time_loader(dataset: ClassFolderDataset, workers: int, p: int, k: int, epochs: int) -> tuple[float, float]:
    """Seconds to the first batch, and images / second over every later batch of ``epochs`` epochs."""
    sampler = PKSampler(dataset.labels, p, k, seed=0)
    loader = DataLoader(
        dataset, batch_sampler=sampler, num_workers=workers, persistent_workers=workers > 0, pin_memory=False
    )
    start = time.perf_counter()
    first, images, steady_start = float("nan"), 0, 0.0
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for batch in loader:
            if images == 0 and np.isnan(first):
                first, steady_start = time.perf_counter() - start, time.perf_counter()
                continue
            images += batch["image"].shape[0]
    return first, images / (time.perf_counter() - steady_start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=1200, help="number of generated JPEGs")
    parser.add_argument("--per-class", type=int, default=6, help="images per class folder")
    parser.add_argument("--width", type=int, default=500)
    parser.add_argument("--height", type=int, default=375)
    parser.add_argument("--image-size", type=int, default=224, help="RandomResizedCrop output side")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--p", type=int, default=16)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the main process (workers use 1)")
    parser.add_argument("--quick", action="store_true", help="240 images, workers 0 and 2, one epoch")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.quick:
        args.images, args.workers, args.epochs = 240, [0, 2], 1
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible; "
        f"torch {torch.__version__}, torchvision {torchvision.__version__}, Pillow {PIL.__version__}; "
        f"main-process torch threads {torch.get_num_threads()}; load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"data: {args.images} JPEGs {args.width}x{args.height} (q90), {args.images // args.per_class} classes; "
        f"batches {args.p}x{args.k}; RandomResizedCrop {args.image_size} + flip + normalise"
    )
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        _write_jpegs(root, args.images, args.per_class, args.width, args.height)
        megabytes = sum(f.stat().st_size for f in root.rglob("*.jpg")) / 2**20
        print(f"written: {megabytes:.1f} MiB\n")
        dataset = ClassFolderDataset(root, transform=train_transform(args.image_size))
        print("| workers | first batch (s) | images / s |\n|---:|---:|---:|")
        for workers in args.workers:
            first, rate = _time_loader(dataset, workers, args.p, args.k, args.epochs)
            print(f"| {workers} | {first:.2f} | {rate:.0f} |")


if __name__ == "__main__":
    main()
