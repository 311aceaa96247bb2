"""The training recipe of the real-image benchmark: one set of settings, the network, the losses, the optimiser.

Every row of ``compare.py`` trains the same :class:`ranklit.models.EmbeddingNet` with the same data, sampler,
augmentation, optimiser and steps; only the loss differs. ``Recipe`` holds every setting the benchmark varied
(``--set name=value`` changes one) and ``ISSUE_RECIPE`` the run of issue 44 that lost to the untrained features.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ranklit import losses
from ranklit.models import EmbeddingNet


@dataclass(frozen=True)
class Recipe:
    """The settings of one training run (defaults: the recipe this benchmark found best, see RESULTS.md)."""

    steps: int = 100
    p: int = 16  # classes per batch
    k: int = 4  # images per class
    image_size: int = 64
    hflip: bool = False  # icons have a direction (go-next / go-previous): a mirror image is another class
    scale_min: float = 0.16  # RandomResizedCrop's smallest area fraction
    optimizer: str = "adam"  # adam | adamw
    backbone_lr: float = 1e-4
    head_lr: float = 1e-3
    weight_decay: float = 0.0
    warmup_steps: int = 0  # linear warm-up of every learning rate
    head_only_steps: int = 0  # the backbone frozen for these first steps
    schedule: str = "constant"  # constant | cosine (after the warm-up)
    batchnorm: str = "frozen"  # frozen (ImageNet statistics, affine frozen) | eval (statistics only) | train
    embedding_dim: int = 512  # 0: the pooled features, no head
    head_init: str = "default"  # default (PyTorch's Linear) | orthogonal
    pooling: str = "avg"
    layer_norm: bool = False  # LayerNorm without affine before the head (ROADMAP's CUB recipe)
    tau: float = 0.01  # the sigmoid temperature of ROADMAP and Smooth-AP
    lam: float = 0.5  # ROADMAP's weight of the calibration loss (0: its SupAP term alone)
    pos_margin: float = 0.9  # ROADMAP's calibration thresholds: positives above, negatives below
    neg_margin: float = 0.6
    ms_alpha: float = 2.0  # MultiSimilarity (Wang et al. 2019): positive scale
    ms_beta: float = 50.0  # negative scale
    ms_base: float = 0.5  # similarity margin
    ms_epsilon: float = 0.1  # the miner's margin

    def changed(self, **values: Any) -> Recipe:
        """A copy with ``values`` set; an unknown name is a ``ValueError`` naming the known ones."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"unknown recipe settings {unknown}; known: {', '.join(sorted(names))}")
        return dataclasses.replace(self, **values)

    def parse(self, assignment: str) -> Recipe:
        """``name=value`` (``--set``), the value converted to the field's type."""
        name, _, text = assignment.partition("=")
        fields = {f.name: f for f in dataclasses.fields(self)}
        if name not in fields or not text:
            raise ValueError(f"--set {assignment!r}: expected NAME=VALUE with NAME one of {', '.join(fields)}")
        kind = type(getattr(self, name))
        value: Any = text.lower() in ("1", "true", "yes") if kind is bool else kind(text)
        return self.changed(**{name: value})


ISSUE_RECIPE = Recipe(hflip=True, batchnorm="train")  # issue 44's run: BN trained, flips, Adam 1e-4 / 1e-3


def load_backbone(net: EmbeddingNet, path: Path) -> None:
    """Load a timm state dict file (safetensors or .pth) into ``net.backbone``: every backbone tensor must be there,
    the classifier's are left out (the embedding network has none)."""
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        state = load_file(str(path))
    else:
        state = torch.load(path, map_location="cpu", weights_only=True)
    state = {k: v for k, v in state.items() if not k.startswith("classifier.")}
    net.backbone.load_state_dict(state, strict=True)


def build_net(recipe: Recipe, backbone: str, weights: Path | None) -> EmbeddingNet:
    """The embedding network of the recipe (seed first: the head's initialisation is drawn here)."""
    net = EmbeddingNet(backbone, embedding_dim=recipe.embedding_dim, pooling=recipe.pooling,  # type: ignore[arg-type]
                       layer_norm=recipe.layer_norm, freeze_batchnorm=recipe.batchnorm == "frozen")
    if weights is not None:
        load_backbone(net, weights)
    if recipe.head_init == "orthogonal" and isinstance(net.head, nn.Linear):
        nn.init.orthogonal_(net.head.weight)
        nn.init.zeros_(net.head.bias)
    return net


def set_train_mode(net: EmbeddingNet, recipe: Recipe) -> None:
    """``net.train()``; with ``batchnorm=eval`` the batch-norm layers then normalise with their stored statistics."""
    net.train()
    if recipe.batchnorm == "eval":
        for module in net.backbone.modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                module.eval()


class PMLMultiSimilarity(nn.Module):
    """pytorch-metric-learning's MultiSimilarityLoss on the pairs of its MultiSimilarityMiner (the peer's recipe)."""

    def __init__(self, recipe: Recipe) -> None:
        super().__init__()
        from pytorch_metric_learning import losses as pml_losses
        from pytorch_metric_learning import miners

        self.loss = pml_losses.MultiSimilarityLoss(alpha=recipe.ms_alpha, beta=recipe.ms_beta, base=recipe.ms_base)
        self.miner = miners.MultiSimilarityMiner(epsilon=recipe.ms_epsilon)

    def forward(self, embeddings: Tensor, labels: Tensor, **_: Any) -> Tensor:
        fine = labels[:, 0] if labels.ndim == 2 else labels
        return self.loss(embeddings, fine, self.miner(embeddings, fine))  # type: ignore[no-any-return]


LOSSES: dict[str, Callable[[Recipe], nn.Module]] = {
    "ROADMAPLoss": lambda r: losses.ROADMAPLoss(tau=r.tau, lam=r.lam, alpha=r.pos_margin, beta=r.neg_margin),
    "SmoothAPLoss": lambda r: losses.SmoothAPLoss(tau=r.tau),
    "FastAPLoss": lambda r: losses.FastAPLoss(),
    "ContrastiveLoss": lambda r: losses.ContrastiveLoss(),
    "PML MultiSimilarity + miner": PMLMultiSimilarity,
}


def optimizer_and_schedule(recipe: Recipe, net: EmbeddingNet) -> tuple[torch.optim.Optimizer, Callable[[int], None]]:
    """The optimiser (backbone and head groups, as RetrievalModule's) and a function setting step ``s``'s rates."""
    head = list(net.head_parameters())
    head_ids = {id(p) for p in head}
    backbone = [p for p in net.parameters() if id(p) not in head_ids and p.requires_grad]
    groups = [{"params": backbone, "lr": recipe.backbone_lr, "base_lr": recipe.backbone_lr, "backbone": True},
              {"params": head, "lr": recipe.head_lr, "base_lr": recipe.head_lr, "backbone": False}]
    groups = [g for g in groups if g["params"]]
    kinds = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
    optimizer = kinds[recipe.optimizer](groups, weight_decay=recipe.weight_decay)

    def set_rates(step: int) -> None:
        factor = min(1.0, (step + 1) / recipe.warmup_steps) if recipe.warmup_steps else 1.0
        if recipe.schedule == "cosine" and step >= recipe.warmup_steps:
            done = (step - recipe.warmup_steps) / max(1, recipe.steps - recipe.warmup_steps)
            factor = 0.5 * (1 + math.cos(math.pi * done))
        for group in optimizer.param_groups:
            frozen = group["backbone"] and step < recipe.head_only_steps
            group["lr"] = 0.0 if frozen else group["base_lr"] * factor

    return optimizer, set_rates
