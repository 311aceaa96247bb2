"""ranklit's training step and validation against a bare PyTorch loop with the same network, batches and loss.

Usage::

    python benchmarks/overhead.py                 # quick-start sizes, 5 interleaved rounds (about 3 minutes on 2 cores)
    python benchmarks/overhead.py --rounds 3 --steps 20 --threads 1
    python benchmarks/overhead.py --compile       # adds model.compile (inductor) against eager, ranklit's step
    python benchmarks/overhead.py --profile       # where ranklit's step spends its time (cProfile, by own time)

Sizes are the quick start's (``configs/quickstart.yaml``): ``resnet10t``, 128-d embeddings, 32-pixel synthetic images,
P x K = 8 x 4 batches, ROADMAPLoss, Adam 0.002, logging every 5 steps (CSVLogger), validation on 768 images in
batches of 128 with RetrievalMetrics.

* **Training**: ranklit is ``Trainer.fit`` of ``RetrievalModule`` on ``RetrievalDataModule`` (PKSampler, the
  objective with sample ids, the NaN guard, ``self.log``, Lightning's loop and optimiser wrapper); the bare loop is a
  ``DataLoader`` over the same dataset with the same batch sampler and ``loss(net(images), labels)``, ``zero_grad``,
  ``backward``, ``step``. A step is timed from one batch's start to the next's (data loading included in both),
  after ``--warmup`` steps; each side's figure is the median over all rounds' steps.
* **Validation**: ranklit is ``Trainer.validate`` (embedding in ``validation_step``, ``RetrievalMetrics.compute`` at
  epoch end); the bare loop embeds under ``torch.no_grad`` and calls ``ranklit.functional.retrieval_metrics``. Both
  are split into embedding extraction and metric, medians over the rounds.

Rounds interleave the two sides so that a load change on a shared machine hits both. The last line is
``overhead ratio X``: ranklit's median training step over the bare loop's.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
import warnings
from functools import partial
from typing import Any, ClassVar

import torch

QUICK = dict(levels=2, num_coarse=4, fine_per_parent=8, images_per_class=24, image_size=32)
_EPOCH = 200  # batches per epoch: no epoch boundary inside a timed run (the quick start has 20)


def _parts(seed: int = 0) -> tuple[Any, Any, Any]:
    from ranklit.data import PKSampler, RetrievalDataModule, SyntheticHierarchy
    from ranklit.losses import ROADMAPLoss
    from ranklit.models import EmbeddingNet

    torch.manual_seed(seed)
    net = EmbeddingNet("resnet10t", pretrained=False, embedding_dim=128, pooling="avg")
    data = RetrievalDataModule(
        SyntheticHierarchy(split="train", **QUICK), SyntheticHierarchy(split="test", **QUICK),
        batch_sampler=partial(PKSampler, p=8, k=4, batches_per_epoch=_EPOCH), image_size=32, crop_scale=(0.5, 1.0),
        resize_size=32, crop_size=32, eval_batch_size=128,
    )
    return net, ROADMAPLoss(), data


def _trainer(folder: str, callback: Any, **kwargs: Any) -> Any:
    import lightning as L
    from lightning.pytorch.loggers import CSVLogger

    class MetricsOnly(CSVLogger):
        """The quick start's CSVLogger without its hparams.yaml: built from Python (not the CLI), the module's
        initial hyper-parameters hold the network and loss objects, whose YAML dump takes tens of seconds."""

        def log_hyperparams(self, *args: Any, **kwargs: Any) -> None:
            return None

    return L.Trainer(accelerator="cpu", devices=1, logger=MetricsOnly(folder, name="overhead"), log_every_n_steps=5,
                     enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                     num_sanity_val_steps=0, use_distributed_sampler=False, callbacks=[callback], **kwargs)


def _step_times(starts: list[float], warmup: int) -> list[float]:
    return [b - a for a, b in zip(starts[warmup:-1], starts[warmup + 1 :], strict=True)]


def ranklit_train(steps: int, warmup: int, folder: str, **module_options: Any) -> list[float]:
    import lightning as L

    from ranklit.models import RetrievalModule

    class Clock(L.Callback):
        starts: ClassVar[list[float]] = []

        def on_train_batch_start(self, *args: Any) -> None:
            self.starts.append(time.perf_counter())

        def on_train_end(self, *args: Any) -> None:
            self.starts.append(time.perf_counter())

    net, loss, data = _parts()
    module = RetrievalModule(net, loss, optimizer=partial(torch.optim.Adam, lr=0.002), **module_options)
    clock = Clock()
    clock.starts = []
    _trainer(folder, clock, max_steps=warmup + steps, limit_val_batches=0).fit(module, datamodule=data)
    return _step_times(clock.starts, warmup)


def bare_train(steps: int, warmup: int) -> list[float]:
    net, loss_fn, data = _parts()
    optimizer = torch.optim.Adam(net.parameters(), lr=0.002)
    net.train()
    starts = []
    for i, loaded in enumerate(data.train_dataloader()):
        starts.append(time.perf_counter())
        if i == warmup + steps:
            break
        batch = data.on_after_batch_transfer(loaded, 0)  # uint8 images scaled and normalised, as Lightning's loop does
        loss = loss_fn(net(batch["image"]), batch["label"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return _step_times(starts, warmup)


def ranklit_validate(folder: str) -> tuple[float, float]:
    import lightning as L

    from ranklit.models import RetrievalModule

    class Clock(L.Callback):
        marks: ClassVar[list[float]] = []

        def on_validation_epoch_start(self, *args: Any) -> None:
            self.marks.append(time.perf_counter())

        def on_validation_epoch_end(self, *args: Any) -> None:  # runs before the module's (the metric)
            self.marks.append(time.perf_counter())

        def on_validation_end(self, *args: Any) -> None:
            self.marks.append(time.perf_counter())

    net, loss, data = _parts()
    clock = Clock()
    clock.marks = []
    _trainer(folder, clock).validate(RetrievalModule(net, loss), datamodule=data, verbose=False)
    start, embedded, done = clock.marks
    return embedded - start, done - embedded


def bare_validate() -> tuple[float, float]:
    from ranklit.functional import retrieval_metrics

    net, _, data = _parts()
    net.eval()
    start = time.perf_counter()
    with torch.no_grad():
        loaded = (data.on_after_batch_transfer(b, 0) for b in data.val_dataloader())  # type: ignore[union-attr]
        batches = [(net(b["image"]), b["label"]) for b in loaded]
    embeddings, labels = torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches])
    embedded = time.perf_counter()
    retrieval_metrics(embeddings, labels)
    return embedded - start, time.perf_counter() - embedded


def profile(steps: int) -> None:
    """cProfile of ranklit's ``fit`` over ``steps`` steps: the functions with the most own time, then the hooks."""
    import cProfile
    import pstats

    with tempfile.TemporaryDirectory() as folder:
        profiler = cProfile.Profile()
        profiler.runcall(ranklit_train, steps, 0, folder)
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(20)
    hooks = r"(lightning|ranklit).*(step|log|hook|closure|fetch|objective|forward)"
    stats.sort_stats("cumulative").print_stats(hooks, 25)


def _ms(seconds: float) -> str:
    return f"{1000 * seconds:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=30, help="timed training steps per round (warm-up + steps < 200)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--compile", action="store_true", help="also time ranklit's step with model.compile: true")
    parser.add_argument("--profile", action="store_true", help="profile ranklit's training steps instead (cProfile)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    import logging

    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    print(f"machine: {platform.machine()}, {os.cpu_count()} visible cores, torch threads {args.threads}, "
          f"torch {torch.__version__}, load average at start {os.getloadavg()[0]:.2f}")
    if args.profile:
        profile(args.steps)
        return
    train: dict[str, list[float]] = {"ranklit": [], "bare": [], "compiled": []}
    val: dict[str, list[tuple[float, float]]] = {"ranklit": [], "bare": []}
    compile_time = []
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(args.rounds):
            train["bare"] += bare_train(args.steps, args.warmup)
            train["ranklit"] += ranklit_train(args.steps, args.warmup, folder)
            val["bare"].append(bare_validate())
            val["ranklit"].append(ranklit_validate(folder))
            if args.compile:
                times = ranklit_train(args.steps, 0, folder, compile=True)
                compile_time.append(times[0])
                train["compiled"] += times[args.warmup :]
            print(f"round {round_ + 1}/{args.rounds}: load average {os.getloadavg()[0]:.2f}", flush=True)
    step = {name: statistics.median(times) for name, times in train.items() if times}
    print("\n| training step (median) | ms |\n|---|---:|")
    print(f"| bare PyTorch loop | {_ms(step['bare'])} |\n| ranklit (Lightning) | {_ms(step['ranklit'])} |")
    if "compiled" in step:
        print(f"| ranklit, model.compile: true | {_ms(step['compiled'])} (first step of the first round, with the "
              f"compilation: {compile_time[0]:.1f} s; later rounds reuse the compiled code) |")
        print(f"compile speed-up {step['ranklit'] / step['compiled']:.3f}")
    print("\n| validation (median) | embedding ms | metric ms | total ms |\n|---|---:|---:|---:|")
    totals = {}
    for name, label in (("bare", "bare loop + retrieval_metrics"), ("ranklit", "ranklit (Trainer.validate)")):
        embed, metric = (statistics.median(part) for part in zip(*val[name], strict=True))
        totals[name] = statistics.median(sum(pair) for pair in val[name])
        print(f"| {label} | {_ms(embed)} | {_ms(metric)} | {_ms(totals[name])} |")
    print(f"\nload average at end {os.getloadavg()[0]:.2f}")
    print(f"validation overhead ratio {totals['ranklit'] / totals['bare']:.3f}")
    print(f"overhead ratio {step['ranklit'] / step['bare']:.3f}")


if __name__ == "__main__":
    main()
