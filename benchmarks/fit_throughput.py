"""Training images / s of ``ranklit fit`` over a folder of JPEGs, against the network alone and plain torchvision.

Usage::

    python benchmarks/fit_throughput.py               # on a CUDA machine; writes its section into benchmarks/RESULTS.md
    python benchmarks/fit_throughput.py --dry-run     # CPU, tiny (what the test suite runs); prints the table
    python benchmarks/fit_throughput.py --sizes 800x600 --workers 4 8 --results /tmp/RESULTS.md

For each JPEG size (default 800 × 600 and 2048 × 1536; ``--images`` generated JPEGs, quality 90, 8 per class folder,
``benchmarks/dataloading.py``'s generator) and each worker count (default 1, 4, 8, 15), four figures, images / s of
training after a warm-up of ``--warmup`` steps, timed over ``--seconds`` (at least 3 steps), CUDA synchronised:

- **ranklit fit**: the real command, ``python -m ranklit.cli fit --config configs/folder.yaml`` (ROADMAP on a
  ResNet-50, 512-d, Adam) as a subprocess, adapted by command-line overrides: the generated folder, no pretrained
  weights, ``bf16-mixed``, ``model.channels_last``, P × K = 32 × 4 = 128 images a batch, ``data.num_workers``, no
  validation, logger or checkpoint; a callback of this file (``Throughput``) times the steps and stops the run;
- **ranklit fit, decoded on the device**: the same with ``--data.decode_on_device true`` (the workers hand over the
  JPEG bytes and the crop boxes; nvJPEG decodes, the GPU crops and resizes; ``docs/gpu.md``);
- **plain torchvision**: what a user would write: ``ImageFolder`` + ``RandomResizedCrop(224)`` + flip + ``ToTensor`` +
  ``Normalize`` in a ``DataLoader`` (batch 128, shuffled, the same workers, pinned, persistent), the same network,
  loss and optimiser stepped in this process, the batch copied without blocking;
- **network alone** (the ceiling, once): the same training step on a batch already on the device.

Then the pixel tolerance of decoding on the device: on 64 of the JPEGs of each size, the device path's training crop
against the CPU path's under the same seed (median and largest mean absolute difference per image).

The ratios: ranklit's best over the network's, and ranklit's over plain at the same workers. Estimated time on the
lent H200 (16 cores) at the defaults: 16 ``ranklit fit`` runs of ~15 s start-up + ~10 s warm-up and timing, 8 plain
loaders of ~10 s, the generation ~20 s: about 8 minutes (``--sizes``/``--workers`` to run less). The dry run:
64 × 48 and 160 × 120 JPEGs, 0 and 1 worker(s), ``test_resnet`` at 32 px, batches of 8, float32 (bf16 convolutions
crawl on a CPU), the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import lightning as L
import torch
import torchvision

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
MARKERS = ("<!-- benchmarks/fit_throughput.py: start -->", "<!-- benchmarks/fit_throughput.py: end -->")
FULL = {"sizes": ["800x600", "2048x1536"], "workers": [1, 4, 8, 15], "images": 1536, "net": "resnet50", "image": 224,
        "p": 32, "k": 4, "warmup": 3, "seconds": 4.0, "precision": "bf16-mixed"}
DRY = {"sizes": ["64x48", "160x120"], "workers": [0, 1], "images": 64, "net": "test_resnet", "image": 32, "p": 4,
       "k": 2, "warmup": 1, "seconds": 0.5, "precision": "32-true"}
MIN_STEPS = 3


class Throughput(L.Callback):
    """Times the training steps after ``warmup`` of them for ``seconds`` (at least 3 steps), writes images / s into
    ``out`` (JSON) and stops the run."""

    def __init__(self, out: str, warmup: int = 3, seconds: float = 4.0) -> None:
        self.out, self.warmup, self.seconds = out, warmup, seconds
        self.start, self.steps, self.images = 0.0, 0, 0

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        _sync(pl_module.device)
        if trainer.global_step == self.warmup:
            self.start = time.perf_counter()
        elif trainer.global_step > self.warmup:
            self.steps, self.images = self.steps + 1, self.images + len(batch["index"])
            elapsed = time.perf_counter() - self.start
            if elapsed >= self.seconds and self.steps >= MIN_STEPS:
                Path(self.out).write_text(json.dumps({"images_per_s": self.images / elapsed, "steps": self.steps}))
                trainer.should_stop = True


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def ranklit_fit(root: Path, workers: int, size: dict[str, Any], on_device: bool, cuda: bool) -> float:
    """images / s of ``ranklit fit`` (module docstring), as a subprocess; its stderr's last lines on a failure."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "throughput.json"
        timer = {"class_path": "fit_throughput.Throughput",
                 "init_args": {"out": str(out), "warmup": size["warmup"], "seconds": size["seconds"]}}
        command = [
            sys.executable, "-m", "ranklit.cli", "fit", "--config", str(ROOT / "configs" / "folder.yaml"),
            f"--data.root={root}", "--data.val_dataset=null", f"--data.num_workers={workers}",
            f"--data.decode_on_device={str(on_device).lower()}", f"--data.image_size={size['image']}",
            f"--data.batch_sampler.init_args.p={size['p']}", f"--data.batch_sampler.init_args.k={size['k']}",
            "--data.batch_sampler.init_args.batches_per_epoch=100000", f"--model.net.init_args.backbone={size['net']}",
            "--model.net.init_args.pretrained=false", "--model.channels_last=true",
            f"--trainer.precision={size['precision']}",
            f"--trainer.accelerator={'gpu' if cuda else 'cpu'}", f"--trainer.max_steps={size['warmup'] + 1000}",
            "--trainer.logger=false", "--trainer.enable_checkpointing=false", "--trainer.enable_progress_bar=false",
            "--trainer.enable_model_summary=false", f"--trainer.default_root_dir={folder}",
            "--baseline_validation=false", f"--trainer.callbacks+={json.dumps(timer)}",
        ]
        paths = [str(ROOT / "benchmarks"), str(ROOT), os.environ.get("PYTHONPATH", "")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
        run = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300)
        if run.returncode != 0 or not out.exists():
            raise RuntimeError(f"ranklit fit failed ({run.returncode}):\n{run.stderr[-3000:]}")
        return float(json.loads(out.read_text())["images_per_s"])


def _model(size: dict[str, Any], device: torch.device) -> tuple[Any, Any, Any, Any]:
    """The network, loss and optimiser of ``configs/folder.yaml`` (ResNet-50, ROADMAP, Adam), channels-last, and the
    autocast of ``bf16-mixed`` (off in the dry run's float32)."""
    from ranklit.losses import ROADMAPLoss
    from ranklit.models import EmbeddingNet

    torch.manual_seed(0)
    net = EmbeddingNet(size["net"], pretrained=False, embedding_dim=512).to(device)
    net = net.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-5, weight_decay=1e-4)
    bf16 = size["precision"] == "bf16-mixed"
    return net, ROADMAPLoss(), optimizer, torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16)


def _step(parts: tuple[Any, Any, Any, Any], images: torch.Tensor, labels: torch.Tensor) -> None:
    net, loss_fn, optimizer, autocast = parts
    with autocast:
        embeddings = net(images.contiguous(memory_format=torch.channels_last))
    loss = loss_fn(embeddings, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def _timed(batches: Any, step: Any, size: dict[str, Any], device: torch.device) -> float:
    """images / s of ``step`` over ``batches`` after the warm-up (the :class:`Throughput` rule)."""
    seen, images, start = 0, 0, 0.0
    for images_batch, labels in batches:
        step(images_batch, labels)
        _sync(device)
        seen += 1
        if seen == size["warmup"]:
            start = time.perf_counter()
        elif seen > size["warmup"]:
            images += len(labels)
            elapsed = time.perf_counter() - start
            if elapsed >= size["seconds"] and seen - size["warmup"] >= MIN_STEPS:
                return images / elapsed
    raise RuntimeError("the loader ran out of batches before the timing ended: generate more images (--images)")


def network_alone(size: dict[str, Any], device: torch.device) -> float:
    parts = _model(size, device)
    batch = size["p"] * size["k"]
    images = torch.randn(batch, 3, size["image"], size["image"], device=device)
    labels = (torch.arange(batch, device=device) // size["k"]).long()
    forever = iter(lambda: (images, labels), None)
    return _timed(forever, lambda x, y: _step(parts, x, y), size, device)


def plain_torchvision(root: Path, workers: int, size: dict[str, Any], device: torch.device) -> float:
    from torch.utils.data import DataLoader
    from torchvision import transforms as T
    from torchvision.datasets import ImageFolder

    transform = T.Compose([T.RandomResizedCrop(size["image"]), T.RandomHorizontalFlip(), T.ToTensor(),
                           T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
    loader = DataLoader(ImageFolder(str(root), transform=transform), batch_size=size["p"] * size["k"], shuffle=True,
                        num_workers=workers, pin_memory=device.type == "cuda", persistent_workers=workers > 0,
                        drop_last=True)
    parts = _model(size, device)

    def forever() -> Any:
        while True:
            yield from loader

    # the ranklit runs' P x K labels, not the loader's: a shuffled ImageFolder batch may hold no two images of one
    # class (the loss refuses it); what is compared is the loader, the loss costs the same
    pk_labels = (torch.arange(size["p"] * size["k"], device=device) // size["k"]).long()

    def step(images: torch.Tensor, _labels: torch.Tensor) -> None:
        _step(parts, images.to(device, non_blocking=True), pk_labels)

    return _timed(forever(), step, size, device)


def pixel_differences(root: Path, device: torch.device, files: int = 64) -> tuple[float, float]:
    """Median and largest mean |difference| (of 255) per image between the device path's training crops and the CPU
    path's (ranklit's workers), under the same seeds: nvJPEG and the device's resize against libjpeg-turbo, Pillow's
    reduced decoding and the CPU's resize."""
    from ranklit.data.images._crop_first import crop_first
    from ranklit.data.images._device_decode import decode_encoded
    from ranklit.data.images._encoded import collate
    from ranklit.data.images.transforms import train_transform

    cpu, on_device = crop_first(train_transform(224), on_device=True), crop_first(train_transform(224), on_device=True)
    on_device.encode = True
    differences = []
    for seed, path in enumerate(sorted(root.rglob("*.jpg"))[:files]):
        torch.manual_seed(seed)
        expected = cpu.from_file(path)
        torch.manual_seed(seed)
        batch = collate([{"image": on_device.from_file(path), "label": torch.tensor(0)}])
        image = decode_encoded(batch["encoded"], batch["image"].to(device))[0].cpu()
        differences.append((image.float() - expected.float()).abs().mean().item())
    return statistics.median(differences), max(differences)


def _rate(value: float) -> str:
    """images / s for the table: whole numbers, two decimals below 100 (the dry run's rates)."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.2f}"


def _write_section(path: Path, section: str) -> None:
    from gpu import write_section

    write_section(path, section, MARKERS)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny sizes (the test suite's run)")
    parser.add_argument("--sizes", nargs="+", default=None, help="JPEG sizes, WxH (default 800x600 2048x1536)")
    parser.add_argument("--workers", type=int, nargs="+", default=None, help="loader workers (default 1 4 8 15)")
    parser.add_argument("--images", type=int, default=None, help="JPEGs generated per size (default 1536)")
    parser.add_argument("--seconds", type=float, default=None, help="timed seconds per figure (default 4)")
    parser.add_argument("--results", type=Path, default=None,
                        help="file to write the section into (default: benchmarks/RESULTS.md on a GPU; dry run: none)")
    args = parser.parse_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        parser.error("no CUDA device: run it on a GPU machine, or `--dry-run` to check it on the CPU")
    size = dict(DRY if args.dry_run else FULL)
    for key in ("sizes", "workers", "images", "seconds"):
        size[key] = getattr(args, key) if getattr(args, key) is not None else size[key]
    cuda = not args.dry_run
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]  # this checkout's ranklit, as the `ranklit fit` runs get
    from dataloading import _write_jpegs
    from gpu import device_name

    ceiling = network_alone(size, device)
    print(f"network alone: {_rate(ceiling)} images / s", flush=True)
    rows, pixels = [], []
    for text in size["sizes"]:
        width, height = (int(v) for v in text.split("x"))
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            _write_jpegs(root, size["images"], 8, width, height)
            pixels.append((text, *pixel_differences(root, device)))
            for workers in size["workers"]:
                rates = [ranklit_fit(root, workers, size, False, cuda), ranklit_fit(root, workers, size, True, cuda),
                         plain_torchvision(root, workers, size, device)]
                rows.append((text, workers, *rates))
                print(f"{text}, {workers} workers: " + ", ".join(_rate(r) for r in rates), flush=True)
    table = ["| JPEG size | workers | ranklit fit (images / s) | ranklit fit, decoded on the device | plain "
             "torchvision | ranklit (best of both) / network alone | ranklit / plain |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for text, workers, cpu, on_device, plain in rows:
        best = max(cpu, on_device)
        table.append(f"| {text.replace('x', ' × ')} | {workers} | {_rate(cpu)} | {_rate(on_device)} | {_rate(plain)} | "
                     f"{best / ceiling:.2f} | {best / plain:.2f} |")
    summary = []
    for text in size["sizes"]:
        mine = [r for r in rows if r[0] == text]
        best = max(mine, key=lambda r: max(r[2], r[3]))
        plain = max(mine, key=lambda r: r[4])
        rate = max(best[2], best[3])
        summary.append(f"- {text}: ranklit's best {_rate(rate)} images / s ({best[1]} workers) = {rate / ceiling:.2f}× "
                       f"the network alone, {rate / plain[4]:.2f}× plain's best ({_rate(plain[4])}, "
                       f"{plain[1]} workers)")
    command = "python benchmarks/fit_throughput.py" + (" --dry-run" if args.dry_run else "")
    section = "\n".join([
        "## Training throughput: `ranklit fit` from JPEG files (benchmarks/fit_throughput.py)", "",
        f"Command: `{command}`. Device: **{device_name(device)}**, {os.cpu_count()} CPUs; torch {torch.__version__}, "
        f"torchvision {torchvision.__version__}; Python {platform.python_version()}; {time.strftime('%Y-%m-%d')}; "
        f"{size['net']}, batch {size['p'] * size['k']}, {size['precision']}, channels-last; network alone: "
        f"**{_rate(ceiling)} images / s**; each figure after {size['warmup']} warm-up steps, over {size['seconds']} s.",
        "",
        *table, "", *summary, "",
        "Pixels of the device path against the CPU path's (training crops 224, the same seeds; mean |difference| per "
        "image, of 255): " + "; ".join(f"{text}: median {median:.3f}, largest {largest:.3f}"
                                       for text, median, largest in pixels) + ".",
    ])
    print("\n" + section, flush=True)
    results = args.results if args.results is not None else (None if args.dry_run else RESULTS)
    if results is not None:
        _write_section(results, section)
        print(f"written into {results}")
    return section


if __name__ == "__main__":
    main()
