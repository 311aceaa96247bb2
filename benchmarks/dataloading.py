"""Images per second per loader worker: ranklit's training pipeline vs plain torchvision vs the bare JPEG decode.

Usage::

    python benchmarks/dataloading.py                 # 500x375, 800x600, 1024x768 JPEGs; 1 worker; about 2 minutes
    python benchmarks/dataloading.py --quick         # a smoke run (96 small images per size)
    python benchmarks/dataloading.py --workers 0 1 2 --images 1200

For each image size, generated JPEGs (quality 90, smooth colour fields plus noise, one folder per class of
``--per-class`` images) are read by three pipelines, each in one ``DataLoader`` with ``--workers`` worker processes
(``0``: the main process, one torch thread), batches of 64, one pass over the images after one warm-up batch:

- **ranklit**: what ``ranklit fit`` runs: ``ClassFolderDataset`` + ``PKSampler`` (16 x 4) through
  ``RetrievalDataModule.train_dataloader()`` with its training transform (RandomResizedCrop 224, scale (0.16, 1),
  flip, normalise; per-sample seeded augmentation) and its reduced-size JPEG decoding where every crop stays at
  least 224 px (``ranklit.data.decoding``; with scale 0.16 only images of about 1.7 megapixels or more qualify);
- **plain**: ``torchvision.datasets.ImageFolder`` + ``RandomResizedCrop(224, scale=(0.16, 1))`` + flip +
  ``ToTensor`` + ``Normalize``, shuffled batches of 64: the usual PyTorch recipe;
- **bare decode**: ``ImageFolder``'s loader alone (``PIL.Image.open(...).convert("RGB")``), no transform: the ceiling
  of any pipeline that decodes every JPEG at full size.

It prints one Markdown table (images / s per worker: total images / s divided by the number of workers, or the
main process's rate for ``--workers 0``) for ``benchmarks/RESULTS.md``, with the machine, the versions and the load
average: run it on idle cores.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np
import PIL
import torch
import torchvision
from PIL import Image
from torch.utils.data import DataLoader
from torchvision import transforms as T
from torchvision.datasets import ImageFolder

from ranklit.data import ClassFolderDataset, PKSampler, RetrievalDataModule

SIZES = ((500, 375), (800, 600), (1024, 768))  # CUB / SOP photographs, iNaturalist's 800 px, landmarks' 1024 px
BATCH = 64


def _write_jpegs(root: Path, images: int, per_class: int, width: int, height: int) -> None:
    """Smooth random colour fields with noise (about as compressible as photographs), ``per_class`` per folder."""
    rng = np.random.default_rng(0)
    for i in range(images):
        coarse = rng.uniform(0, 255, size=(height // 32 + 1, width // 32 + 1, 3)).astype(np.uint8)
        field = np.asarray(Image.fromarray(coarse).resize((width, height), Image.BILINEAR), dtype=np.int16)
        pixels = np.clip(field + rng.integers(-20, 21, size=field.shape), 0, 255).astype(np.uint8)
        path = root / f"class{i // per_class:04d}" / f"{i:06d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels).save(path, "JPEG", quality=90)


def _ranklit(root: Path, workers: int) -> DataLoader:
    dataset = ClassFolderDataset(root)
    module = RetrievalDataModule(dataset, batch_sampler=partial(PKSampler, p=16, k=4), num_workers=workers)
    return module.train_dataloader()


def _plain(root: Path, workers: int) -> DataLoader:
    transform = T.Compose([T.RandomResizedCrop(224, scale=(0.16, 1.0)), T.RandomHorizontalFlip(), T.ToTensor(),
                           T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])  # fmt: skip
    return DataLoader(ImageFolder(str(root), transform=transform), batch_size=BATCH, shuffle=True,
                      num_workers=workers, persistent_workers=workers > 0)  # fmt: skip


def _decode_only(image: Image.Image) -> int:
    return image.size[0]  # the decode happened in ImageFolder's loader


def _bare(root: Path, workers: int) -> DataLoader:
    return DataLoader(ImageFolder(str(root), transform=_decode_only), batch_size=BATCH, shuffle=True,
                      num_workers=workers, persistent_workers=workers > 0)  # fmt: skip


PIPELINES = {"ranklit": _ranklit, "plain torchvision": _plain, "bare decode": _bare}


def _rate(loader: DataLoader, images: int) -> float:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=640, help="generated JPEGs per size (and images timed)")
    parser.add_argument("--per-class", type=int, default=8, help="images per class folder")
    parser.add_argument("--workers", type=int, nargs="+", default=[1])
    parser.add_argument("--quick", action="store_true", help="96 images of 1/4 the sizes: a smoke run")
    args = parser.parse_args()
    torch.set_num_threads(1)
    sizes = [(w // 4, h // 4) for w, h in SIZES] if args.quick else list(SIZES)
    images = 96 if args.quick else args.images
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible, load average "
        f"{os.getloadavg()[0]:.1f}; torch {torch.__version__}, torchvision {torchvision.__version__}, "
        f"Pillow {PIL.__version__}; {images} JPEGs (q90) per size; RandomResizedCrop 224 + flip + normalise\n"
    )
    rows = []
    for width, height in sizes:
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            _write_jpegs(root, images, args.per_class, width, height)
            for workers in args.workers:
                rates = [_rate(build(root, workers), images) / max(workers, 1) for build in PIPELINES.values()]
                rows.append(f"| {width} x {height} | {workers} | " + " | ".join(f"{r:.0f}" for r in rates) + " |")
                print(rows[-1], flush=True)
    header = "| JPEG size | workers | " + " | ".join(f"{name} (images / s / worker)" for name in PIPELINES) + " |"
    print("\n" + "\n".join([header, "|---|---:|" + "---:|" * len(PIPELINES), *rows]))


if __name__ == "__main__":
    main()
