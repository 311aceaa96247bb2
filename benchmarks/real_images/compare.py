"""Real-image retrieval benchmark: ranklit's losses against the untrained pretrained features and the peer's
MultiSimilarity, on the icon-theme set of ``build_icons.py`` with the EfficientNet-Lite0 of ``convert_weights.py``.

One command (after the two preparation scripts, docs/benchmarks-real-images.md)::

    python benchmarks/real_images/compare.py            # every row, 3 seeds, prints the Markdown table

Every trained row uses ranklit's pieces: ``CSVDataset`` (the data set's CSV), ``PKSampler`` (P×K batches),
``train_transform`` / ``test_transform`` (augmentation), ``EmbeddingNet`` (the network), the ranklit loss through
``ranking_objective`` (each query ranked against its batch without itself, as ``RetrievalModule.training_step``) and
``retrieval_metrics`` (the exact metrics with ``[N, 3]`` labels). The loop is plain PyTorch (a Lightning Trainer adds
nothing to measure here and a few seconds per run); the MultiSimilarity row trains the same network with the same
batches, augmentation, optimiser and steps, only the loss and its miner being pytorch-metric-learning's.
``--set NAME=VALUE`` changes one recipe setting (``_recipe.Recipe``); ``--log FILE`` appends every run as JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torchvision.transforms import v2

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _recipe import ISSUE_RECIPE, LOSSES, Recipe, build_net, optimizer_and_schedule, set_train_mode

from ranklit.data import CSVDataset, PKSampler
from ranklit.data.images.transforms import test_transform, train_transform
from ranklit.functional import retrieval_metrics
from ranklit.training import ranking_objective

MEAN = STD = (0.5, 0.5, 0.5)  # EfficientNet-Lite0's input normalisation
UNTRAINED = ("pretrained features, untrained (pooled)", "pretrained features + untrained head")
METRICS = {"map_at_r": "mAP@R", "recall_at_1": "R@1", "recall_at_5": "R@5", "hap": "H-AP"}


def load_split(root: Path, split: str) -> tuple[Tensor, Tensor]:
    """All the images of a split as ``uint8 [N, 3, H, W]`` and their ``[N, 3]`` labels, read by ``CSVDataset``."""
    dataset = CSVDataset(root, split, transform=v2.PILToTensor(), csv_file="dataset.csv")
    images = torch.stack([dataset[i]["image"] for i in range(len(dataset))])
    return images, dataset.labels


@torch.no_grad()
def embed(net: torch.nn.Module, images: Tensor, size: int) -> Tensor:
    """Test-time embeddings (shorter side resized to ``size``, centre crop, normalised), in eval mode."""
    net.eval()
    transform = test_transform(size, size, mean=MEAN, std=STD)
    return torch.cat([net(transform(images[i : i + 256])) for i in range(0, len(images), 256)])


def evaluate(embeddings: Tensor, labels: Tensor) -> dict[str, float]:
    """mAP@R, R@1, R@5 (finest level) and H-AP (the three levels) of every test image against the others."""
    values = retrieval_metrics(embeddings, labels, recall_at=(1, 5))
    return {key: float(values[key]) for key in METRICS}


def pml_cross_check(embeddings: Tensor, labels: Tensor) -> dict[str, float]:
    """pytorch-metric-learning's AccuracyCalculator on the same embeddings (its mAP@R and P@1 = R@1)."""
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator

    calculator = AccuracyCalculator(include=("mean_average_precision_at_r", "precision_at_1"), k="max_bin_count")
    fine = labels[:, 0]
    out = calculator.get_accuracy(embeddings, fine, embeddings, fine, ref_includes_query=True)
    return {"map_at_r": float(out["mean_average_precision_at_r"]), "recall_at_1": float(out["precision_at_1"])}


def batches(sampler: PKSampler) -> Iterator[list[int]]:
    """The sampler's batches, epoch after epoch."""
    for epoch in itertools.count():
        sampler.set_epoch(epoch)
        yield from sampler


def train(method: str, recipe: Recipe, seed: int, data: dict[str, Any]) -> torch.nn.Module:
    """Train the recipe's network with ``method``'s loss for ``recipe.steps`` P×K batches."""
    torch.manual_seed(seed)
    net = build_net(recipe, data["backbone"], data["weights"])
    loss_fn = LOSSES[method](recipe)
    optimizer, set_rates = optimizer_and_schedule(recipe, net)
    images, labels = data["train"]
    sampler = PKSampler(labels, p=recipe.p, k=recipe.k, seed=seed)
    augment = train_transform(recipe.image_size, scale=(recipe.scale_min, 1.0), mean=MEAN, std=STD,
                              hflip=recipe.hflip)
    for step, batch in zip(range(recipe.steps), batches(sampler), strict=False):
        set_train_mode(net, recipe)
        set_rates(step)
        index = torch.tensor(batch)
        embeddings = net(torch.stack([augment(images[i]) for i in batch]))
        objective = ranking_objective(loss_fn, embeddings, labels[index], index)
        optimizer.zero_grad(set_to_none=True)
        objective.loss.backward()
        optimizer.step()
    return net


def run(method: str, recipe: Recipe, seed: int, data: dict[str, Any]) -> tuple[dict[str, float], Tensor]:
    """One row's metrics for one seed (and the test embeddings, for the cross-check)."""
    if method == UNTRAINED[0]:
        net = build_net(recipe.changed(embedding_dim=0), data["backbone"], data["weights"])
    elif method == UNTRAINED[1]:
        torch.manual_seed(seed)
        net = build_net(recipe, data["backbone"], data["weights"])
    else:
        net = train(method, recipe, seed, data)
    test_images, test_labels = data["test"]
    embeddings = embed(net, test_images, recipe.image_size)
    return evaluate(embeddings, test_labels), embeddings


def table(results: dict[str, list[dict[str, float]]]) -> str:
    """The Markdown table: mean ± sd over the seeds for each row."""
    lines = ["| method | " + " | ".join(METRICS.values()) + " |", "|---|" + "---:|" * len(METRICS)]
    for method, runs in results.items():
        cells = []
        for key in METRICS:
            values = [r[key] for r in runs]
            sd = statistics.stdev(values) if len(values) > 1 else 0.0
            cells.append(f"{statistics.mean(values):.3f} ± {sd:.3f}")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("data/icons"), help="build_icons.py's output folder")
    parser.add_argument("--weights", type=Path, default=Path("data/tf_efficientnet_lite0.safetensors"),
                        help="convert_weights.py's output ('none': random weights, for tests)")
    parser.add_argument("--backbone", default="tf_efficientnet_lite0")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rows", nargs="+", default=[*UNTRAINED, *LOSSES], help="rows to run (default: all)")
    parser.add_argument("--issue-recipe", action="store_true", help="issue 44's reference recipe instead")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="change a recipe setting")
    parser.add_argument("--quick", action="store_true", help="2 steps, one seed, batches 4 x 2 (a smoke test)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's)")
    parser.add_argument("--log", type=Path, help="append every run to this JSON-lines file")
    parser.add_argument("--no-cross-check", action="store_true", help="skip pytorch-metric-learning's calculator")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    recipe = ISSUE_RECIPE if args.issue_recipe else Recipe()
    if args.quick:
        recipe, args.seeds = recipe.changed(steps=2, p=4, k=2), args.seeds[:1]
    for assignment in args.set:
        recipe = recipe.parse(assignment)
    unknown = [row for row in args.rows if row not in (*UNTRAINED, *LOSSES)]
    if unknown:
        raise SystemExit(f"unknown rows {unknown}; rows: {', '.join((*UNTRAINED, *LOSSES))}")
    weights = None if str(args.weights) == "none" else args.weights
    data = {"backbone": args.backbone, "weights": weights,
            "train": load_split(args.data, "train"), "test": load_split(args.data, "test")}
    print(f"recipe: {recipe}", flush=True)
    results: dict[str, list[dict[str, float]]] = {}
    for method in args.rows:
        for seed in args.seeds[: 1 if method == UNTRAINED[0] else None]:  # no randomness in the pooled features
            start = time.perf_counter()
            metrics, embeddings = run(method, recipe, seed, data)
            results.setdefault(method, []).append(metrics)
            seconds = time.perf_counter() - start
            print(f"{method} seed {seed}: " + ", ".join(f"{METRICS[k]} {v:.4f}" for k, v in metrics.items())
                  + f" ({seconds:.0f} s)", flush=True)
            if args.log:
                record = {"method": method, "seed": seed, "recipe": dataclasses.asdict(recipe), **metrics,
                          "seconds": round(seconds, 1)}
                with open(args.log, "a") as handle:
                    handle.write(json.dumps(record) + "\n")
            if method == UNTRAINED[0] and not args.no_cross_check:
                check = pml_cross_check(embeddings, data["test"][1])
                print(f"  cross-check, pytorch-metric-learning's AccuracyCalculator: mAP@R {check['map_at_r']:.4f}, "
                      f"P@1 {check['recall_at_1']:.4f}", flush=True)
    print(table(results))


if __name__ == "__main__":
    main()
