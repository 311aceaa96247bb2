"""Images per second per loader worker: ranklit's training pipeline vs plain torchvision vs the bare JPEG decode.

Usage::

    python benchmarks/dataloading.py            # 500x375, 800x600, 1024x768, 2048x1536; 1 and 4 workers; ~7 min
    python benchmarks/dataloading.py --quick    # a smoke run (small images, 1 worker, 1 repeat)
    python benchmarks/dataloading.py --workers 1 2 --images 640 --repeats 5

For each image size, generated JPEGs (quality 90, smooth colour fields plus noise, one folder per class of
``--per-class`` images; 64 distinct images, repeated to ``--images`` files) are read by five pipelines, each in one
``DataLoader`` with ``--workers`` worker processes (``0``: the main process, one torch thread), batches of 64, one pass
over the images after one warm-up batch, the pipelines taking turns ``--repeats`` times (the table gives medians):

- **ranklit**: what ``ranklit fit`` runs: ``ClassFolderDataset`` + ``PKSampler`` (16 x 4) through
  ``RetrievalDataModule.train_dataloader()`` with its training transform (RandomResizedCrop 224, scale (0.16, 1),
  flip, normalise; per-sample seeded augmentation), the crop drawn from the JPEG's header and the file decoded at the
  largest reduction (1/2, 1/4, 1/8) that keeps that crop at least 224 px from 1 megapixel on, below it at full
  size by torchvision (``ranklit.data.images._crop_first``); its batches are ``uint8`` images, scaled and normalised on
  the device after the transfer (``RetrievalDataModule.on_after_batch_transfer``), so on a GPU the loader's rate is the
  input rate;
- **ranklit, normalised in the main process**: the same, with each batch scaled and normalised by that hook in the
  main process, as when training on the CPU;
- **ranklit, decode first**: the same with the transform given to the dataset (``train_transform(224)``), so every
  file is decoded at full size first (ranklit before reduced decoding per crop, below 1.7 megapixels);
- **plain torchvision**: ``torchvision.datasets.ImageFolder`` (``PIL.Image.open(...).convert("RGB")``) +
  ``RandomResizedCrop(224, scale=(0.16, 1))`` + flip + ``ToTensor`` + ``Normalize``, shuffled batches of 64;
- **bare decode**: ``ImageFolder``'s loader alone, no transform: the ceiling of any pipeline that decodes every JPEG
  at full size.

It prints one Markdown table (images / s per worker: total images / s divided by the number of workers, or the
main process's rate for ``--workers 0``; and ranklit's rate over plain torchvision's) for ``benchmarks/RESULTS.md``,
with the machine, the versions and the load average: run it on idle cores.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import PIL
import torch
import torchvision
from PIL import Image
from torch.utils.data import DataLoader
from torchvision import transforms as T
from torchvision.datasets import ImageFolder

from ranklit.data import ClassFolderDataset, PKSampler, RetrievalDataModule
from ranklit.data.images.transforms import train_transform

SIZES = ((500, 375), (800, 600), (1024, 768), (2048, 1536))  # CUB / SOP, iNaturalist 800 px, landmarks 1024 px,
# and the landmark and iNaturalist originals
BATCH = 64
DISTINCT = 64  # distinct generated images per size; the others are copies (decoding costs the same)


def _write_jpegs(root: Path, images: int, per_class: int, width: int, height: int) -> None:
    """Smooth random colour fields with noise (about as compressible as photographs), ``per_class`` per folder."""
    rng = np.random.default_rng(0)
    for i in range(images):
        path = root / f"class{i // per_class:04d}" / f"{i:06d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        if i >= DISTINCT:
            shutil.copyfile(root / f"class{(i % DISTINCT) // per_class:04d}" / f"{i % DISTINCT:06d}.jpg", path)
            continue
        coarse = rng.uniform(0, 255, size=(height // 32 + 1, width // 32 + 1, 3)).astype(np.uint8)
        field = np.asarray(Image.fromarray(coarse).resize((width, height), Image.BILINEAR), dtype=np.int16)
        pixels = np.clip(field + rng.integers(-20, 21, size=field.shape), 0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(path, "JPEG", quality=90)


def _module(root: Path, workers: int, transform: Callable[[Any], Any] | None = None) -> RetrievalDataModule:
    dataset = ClassFolderDataset(root, transform=transform)
    return RetrievalDataModule(dataset, batch_sampler=partial(PKSampler, p=16, k=4), num_workers=workers)


def _ranklit(root: Path, workers: int, transform: Callable[[Any], Any] | None = None) -> DataLoader:
    return _module(root, workers, transform).train_dataloader()


class _NormalisedHere:
    """ranklit's loader with each ``uint8`` batch scaled and normalised in this process (training on the CPU)."""

    def __init__(self, root: Path, workers: int) -> None:
        self.module = _module(root, workers)
        self.loader = self.module.train_dataloader()

    def __iter__(self) -> Any:
        return (self.module.on_after_batch_transfer(batch, 0) for batch in self.loader)


def _plain(root: Path, workers: int) -> DataLoader:
    transform = T.Compose([T.RandomResizedCrop(224, scale=(0.16, 1.0)), T.RandomHorizontalFlip(), T.ToTensor(),
                           T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
    return DataLoader(ImageFolder(str(root), transform=transform), batch_size=BATCH, shuffle=True,
                      num_workers=workers, persistent_workers=workers > 0)


def _decode_only(image: Image.Image) -> int:
    return image.size[0]  # the decode happened in ImageFolder's loader


def _bare(root: Path, workers: int) -> DataLoader:
    return DataLoader(ImageFolder(str(root), transform=_decode_only), batch_size=BATCH, shuffle=True,
                      num_workers=workers, persistent_workers=workers > 0)


PIPELINES: dict[str, Callable[[Path, int], Any]] = {
    "ranklit": _ranklit,
    "ranklit, normalised in the main process": _NormalisedHere,
    "ranklit, decode first": lambda root, workers: _ranklit(root, workers, train_transform(224)),
    "plain torchvision": _plain,
    "bare decode": _bare,
}


def _rate(loader: Any, images: int) -> float:
    """Images / second over about ``images`` images, after one warm-up batch (worker start-up, first decodes)."""
    batches, seen, start = iter(loader), 0, 0.0
    next(batches)
    start = time.perf_counter()
    while seen < images:
        try:
            batch = next(batches)
        except StopIteration:
            batches = iter(loader)
            continue
        seen += len(batch["image"] if isinstance(batch, dict) else batch[0])
    return seen / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=384, help="JPEGs per size (and images timed per repeat)")
    parser.add_argument("--per-class", type=int, default=8, help="images per class folder")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per pipeline (the median is shown)")
    parser.add_argument("--sizes", nargs="+", default=[f"{w}x{h}" for w, h in SIZES], help="JPEG sizes, WxH")
    parser.add_argument("--quick", action="store_true", help="128 images of 1/4 the sizes, 1 worker, 1 repeat")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    sizes = [tuple(int(v) for v in size.split("x")) for size in args.sizes]
    if args.quick:
        sizes, args.images, args.workers, args.repeats = [(w // 4, h // 4) for w, h in sizes], 128, [1], 1
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible, load average "
        f"{os.getloadavg()[0]:.1f}; torch {torch.__version__}, torchvision {torchvision.__version__}, "
        f"Pillow {PIL.__version__}; {args.images} JPEGs (q90) per size; RandomResizedCrop 224 + flip + normalise; "
        f"medians of {args.repeats}\n"
    )
    rows = []
    for width, height in sizes:
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            _write_jpegs(root, args.images, args.per_class, width, height)
            for workers in args.workers:
                loaders = [build(root, workers) for build in PIPELINES.values()]
                rates: list[list[float]] = [[] for _ in loaders]
                for _ in range(args.repeats):  # the pipelines take turns: a load change hits them alike
                    for loader, rate in zip(loaders, rates, strict=True):
                        rate.append(_rate(loader, args.images) / max(workers, 1))
                medians = [statistics.median(rate) for rate in rates]
                plain = list(PIPELINES).index("plain torchvision")
                cells = [f"{rate:.0f}" for rate in medians] + [f"{medians[0] / medians[plain]:.2f}"]
                rows.append(f"| {width} x {height} | {workers} | " + " | ".join(cells) + " |")
                print(rows[-1], flush=True)
                del loaders  # their worker processes end
    names = [f"{name} (images / s / worker)" for name in PIPELINES] + ["ranklit / plain"]
    header = "| JPEG size | workers | " + " | ".join(names) + " |"
    print("\n" + "\n".join([header, "|---|---:|" + "---:|" * len(names), *rows]))


if __name__ == "__main__":
    main()
