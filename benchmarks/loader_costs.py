"""Where a training item's time goes: per-item CPU time of each step in one process, and wall time per item through
a one-worker ``DataLoader``, for ranklit's pipeline and the plain torchvision one of ``benchmarks/dataloading.py``.

Usage::

    python benchmarks/loader_costs.py                    # 800x600, about 1 minute
    python benchmarks/loader_costs.py --size 1024x768 --repeats 9

The same 64 generated JPEGs as ``dataloading.py`` (quality 90). Rows, in ms per item (medians of ``--repeats``):

- **decode** rows: ``Image.open(f).load()`` (Pillow), ``Image.open(f).convert("RGB")`` (what ``ImageFolder``
  calls: on an RGB image, the decode and a copy), torchvision's decode as ranklit runs it
  (``ranklit.data.images._tensor_jpeg.decode_rgb``: the file read included);
- **item** rows: the plain pipeline's loader and transform, and ranklit's ``CropFirst.from_file`` seeded as its
  sampler seeds every item, decoding, and with ``encode`` (``data.decode_on_device``: the file read, its header and
  the draws; the decode is the device's);
- **loader** rows, wall time in a ``DataLoader`` with one worker: plain, ranklit (``uint8`` batches, normalised on
  the device afterwards), and **collation only**, a dataset that returns one ready image ``[3, 224, 224]`` with its
  label and index, ``float32`` (plain's batches) or ``uint8`` (ranklit's): the cost of collating a batch in the
  worker's shared memory and passing it to the main process; and ranklit with ``decode_on_device`` (the batches of
  JPEG bytes and crop boxes the device would decode: the workers' share and the hand-over of the bytes).

The last line is the bound it gives: plain's loader time over (torchvision's decode + ``uint8`` collation), the ratio
ranklit would reach if cropping and resizing cost nothing. Run it on idle cores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch
from dataloading import BATCH, _plain, _ranklit, _rate, _write_jpegs
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from ranklit.data import ClassFolderDataset, PKSampler, RetrievalDataModule
from ranklit.data.images._crop_first import crop_first
from ranklit.data.images._tensor_jpeg import decode_rgb
from ranklit.data.images.transforms import train_transform


class _Ready(Dataset):
    """Items as ranklit's datasets return them, already computed: what is left is collation and the hand-over."""

    def __init__(self, size: int, dtype: torch.dtype = torch.float32) -> None:
        self.image, self.size = torch.randn(3, 224, 224).to(dtype), size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"image": self.image.clone(), "label": torch.tensor(index % 8), "index": index}


def _encoding(root: Path) -> DataLoader:
    """ranklit's training loader with ``decode_on_device: true`` on the CPU: its batches hold the JPEG bytes."""
    dataset = ClassFolderDataset(root)
    module = RetrievalDataModule(dataset, batch_sampler=partial(PKSampler, p=16, k=4), num_workers=1,
                                 decode_on_device=True)
    return module.train_dataloader()


def _cpu_ms(step: Callable[[int], Any], items: int, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.process_time()
        for i in range(items):
            step(i)
        times.append((time.process_time() - start) / items * 1e3)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="800x600", help="JPEG size, WxH")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    width, height = (int(v) for v in args.size.split("x"))
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        _write_jpegs(root, 64, 8, width, height)
        files = sorted(root.rglob("*.jpg"))
        plain = _plain(root, 0).dataset
        ranklit = crop_first(train_transform(224), on_device=True)  # as RetrievalDataModule sets it: uint8 crops

        encoding = crop_first(train_transform(224), on_device=True)
        encoding.encode = True

        def seeded(i: int, transform: Any = ranklit) -> Any:
            torch.default_generator.manual_seed(i)
            return transform.from_file(files[i])

        steps: dict[str, Callable[[int], Any]] = {
            "decode: Pillow, Image.open().load()": lambda i: Image.open(files[i]).load(),
            "decode: Pillow, Image.open().convert('RGB') (ImageFolder)": lambda i: Image.open(files[i]).convert("RGB"),
            "decode: torchvision (decode_rgb)": lambda i: decode_rgb(files[i]),
            "item: plain torchvision (loader + transform)": lambda i: plain[i],
            "item: ranklit CropFirst.from_file (uint8 crop)": seeded,
            "item: ranklit CropFirst.from_file, encode (bytes + box)": partial(seeded, transform=encoding),
        }
        for name, step in steps.items():
            rows.append((name, _cpu_ms(step, len(files), args.repeats)))
        loaders = {
            "loader, 1 worker, wall: plain torchvision": _plain(root, 1),
            "loader, 1 worker, wall: ranklit": _ranklit(root, 1),
            "loader, 1 worker, wall: ranklit, decode_on_device (bytes + boxes)": _encoding(root),
            "loader, 1 worker, wall: collation only, float32": DataLoader(
                _Ready(BATCH), batch_size=BATCH, num_workers=1, persistent_workers=True
            ),
            "loader, 1 worker, wall: collation only, uint8": DataLoader(
                _Ready(BATCH, torch.uint8), batch_size=BATCH, num_workers=1, persistent_workers=True
            ),
        }
        walls: dict[str, list[float]] = {name: [] for name in loaders}
        for _ in range(args.repeats):  # taking turns: a load change hits them alike
            for name, loader in loaders.items():
                walls[name].append(1e3 / _rate(loader, 4 * BATCH))
        rows += [(name, statistics.median(wall)) for name, wall in walls.items()]
    print(f"{width}x{height} JPEGs (q90), one torch thread, load average {os.getloadavg()[0]:.1f}\n")
    print("| step | ms / item |\n|---|---:|")
    print("\n".join(f"| {name} | {ms:.2f} |" for name, ms in rows))
    values = dict(rows)
    bound = values["loader, 1 worker, wall: plain torchvision"] / (
        values["decode: torchvision (decode_rgb)"] + values["loader, 1 worker, wall: collation only, uint8"]
    )
    ratio = values["loader, 1 worker, wall: plain torchvision"] / values["loader, 1 worker, wall: ranklit"]
    print(f"\nranklit / plain (loader): {ratio:.2f}; bound with a free crop and resize: {bound:.2f}")


if __name__ == "__main__":
    main()
