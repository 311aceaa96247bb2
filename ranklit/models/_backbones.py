"""``EmbeddingNet``: a timm backbone, global pooling, optional LayerNorm, a linear head and L2 normalisation."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import timm
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor, nn
from torch.nn import functional as F

from ranklit.models._pooling import GlobalPool, PoolingName
from ranklit.models._pretrained import create_pretrained
from ranklit.models._weights import load_backbone_weights

__all__ = ["EmbeddingNet", "create_backbone"]


def create_backbone(name: str, pretrained: bool = False, **kwargs: Any) -> nn.Module:
    """Create a timm model without classifier and without global pooling (the embedding net pools itself).

    Unknown names raise a ``ValueError`` listing the closest timm model names.

    >>> create_backbone("resnet5t")
    Traceback (most recent call last):
    ...
    ValueError: Unknown timm backbone 'resnet5t'. Closest timm names: ...
    """
    if not timm.is_model(name):
        close = difflib.get_close_matches(name, timm.list_models(), n=5, cutoff=0.5)
        hint = ", ".join(close) if close else "none (see `timm.list_models()`)"
        raise ValueError(f"Unknown timm backbone {name!r}. Closest timm names: {hint}.")
    if pretrained:  # one line at once without a network (ranklit.models._pretrained)
        return create_pretrained(name, num_classes=0, global_pool="", **kwargs)
    return timm.create_model(name, pretrained=False, num_classes=0, global_pool="", **kwargs)


class EmbeddingNet(nn.Module):
    """Image -> L2-normalised embedding, the network of ROADMAP, HAPPIER, FastAP and the listwise AP loss.

    ``backbone (timm) -> pooling -> [LayerNorm without affine] -> Linear(embedding_dim) -> L2 normalisation``.

    Args:
        backbone: any timm model name (``resnet50``, ``deit_small_patch16_224``, ``resnet34``, ...).
        pretrained: load timm's pretrained weights (from the Hugging Face Hub, or its cache ``HF_HOME`` offline: see
            the docs' "Offline" page; tests use ``False``).
        weights: a local file of the backbone's weights, read with no network: a ``.safetensors`` file, a state dict
            saved by ``torch.save`` (``.pth``, ``.pt``, ``.bin``; read weights-only) or a ranklit checkpoint (its
            ``net.backbone.*``). Keys are matched under a common prefix (``module.``, ``model.``, ``backbone.``,
            ``net.backbone.``…); the classifier, which the backbone does not have, is left out; any other
            missing, unexpected or reshaped tensor is an error (:mod:`ranklit.models._weights`). With
            ``pretrained: true`` too it is an error (which weights were meant is not guessed). A network rebuilt
            from a checkpoint (``ranklit export``/``index``/``test --ckpt_path``,
            ``RetrievalModule.load_from_checkpoint``) is built with ``pretrained: false, weights: null``: its
            weights are the checkpoint's, so neither the hub nor this file is needed again.
        embedding_dim: output dimension; ``0`` keeps the pooled features (no head).
        pooling: ``avg``, ``max``, ``gem`` (learnable p, init 3) or ``token`` (CLS token of ViT/DeiT).
        layer_norm: LayerNorm without affine parameters before the head (ROADMAP's CUB recipe, HAPPIER).
        freeze_batchnorm: keep batch-norm layers in eval mode with frozen statistics and affine parameters;
            ``None`` (default): frozen when the backbone is pretrained (``pretrained`` or ``weights``), trained
            otherwise. Fine-tuning an
            ImageNet network on P×K batches of another domain with batch statistics made every loss worse than
            the untrained features (0.238 mAP@R) on the real-image benchmark; frozen, every loss beats them
            (ROADMAP 0.199 -> 0.292; docs/benchmarks-real-images.md). A random network needs its statistics.
        normalize: L2-normalise the output (the losses and metrics assume it).

    Example:
        >>> import torch
        >>> net = EmbeddingNet("test_resnet", embedding_dim=16)
        >>> out = net(torch.randn(2, 3, 32, 32))
        >>> out.shape, torch.allclose(out.norm(dim=1), torch.ones(2))
        (torch.Size([2, 16]), True)
    """

    def __init__(
        self,
        backbone: str = "resnet50",
        *,
        pretrained: bool = False,
        weights: str | Path | None = None,
        embedding_dim: int = 512,
        pooling: PoolingName = "avg",
        layer_norm: bool = False,
        freeze_batchnorm: bool | None = None,
        normalize: bool = True,
    ) -> None:
        super().__init__()
        if embedding_dim < 0:
            raise ValueError(f"`embedding_dim` must be >= 0 (0 = no head), got {embedding_dim}.")
        if weights is not None and pretrained:
            raise ValueError(
                f"`model.net.init_args`: `pretrained: true` and `weights: {weights}` both choose the backbone's "
                "initial weights: set `pretrained: false` to load the file, or `weights: null` for timm's pretrained "
                "weights."
            )
        # a timm model: `num_features`, `num_prefix_tokens` and `forward_features` are timm's, not nn.Module's
        self.backbone: Any = create_backbone(backbone, pretrained=pretrained)
        if weights is not None:
            rank_zero_info(load_backbone_weights(self.backbone, weights, backbone))
        num_features = int(getattr(self.backbone, "num_features"))  # noqa: B009 (nn.Module's typed __getattr__)
        prefix = int(getattr(self.backbone, "num_prefix_tokens", 1))
        self.pool = GlobalPool(pooling, num_prefix_tokens=prefix)
        self.norm = nn.LayerNorm(num_features, elementwise_affine=False) if layer_norm else nn.Identity()
        self.head = nn.Linear(num_features, embedding_dim) if embedding_dim > 0 else nn.Identity()
        self.embedding_dim = embedding_dim or num_features
        self.freeze_batchnorm = (pretrained or weights is not None) if freeze_batchnorm is None else freeze_batchnorm
        self.normalize = normalize
        if self.freeze_batchnorm:
            for module in self._batchnorms():
                module.requires_grad_(False)
            self.train()  # puts the frozen batch-norm layers in eval mode (Lightning keeps module modes as found)

    def _batchnorms(self) -> list[nn.Module]:
        return [m for m in self.backbone.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]

    def train(self, mode: bool = True) -> EmbeddingNet:
        """Switch train/eval mode; frozen batch-norm layers stay in eval mode."""
        super().train(mode)
        if self.freeze_batchnorm:
            for module in self._batchnorms():
                module.eval()
        return self

    def head_parameters(self) -> list[nn.Parameter]:
        """Parameters after the backbone (pooling exponent, head): they may get their own learning rate."""
        return [*self.pool.parameters(), *self.norm.parameters(), *self.head.parameters()]

    def forward(self, images: Tensor) -> Tensor:
        features = self.pool(self.backbone.forward_features(images))
        embeddings = self.head(self.norm(features))
        return F.normalize(embeddings, dim=-1) if self.normalize else embeddings
