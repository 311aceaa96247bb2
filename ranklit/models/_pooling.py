"""Global pooling of backbone feature maps or tokens, including GeM (Radenović et al., 2018)."""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn

__all__ = ["GeM", "GlobalPool", "PoolingName"]

PoolingName = Literal["avg", "max", "gem", "token"]


class GeM(nn.Module):
    """Generalised-mean pooling ``(mean_{h,w} x^p)^(1/p)`` with a learnable exponent ``p`` (init 3).

    ``p = 1`` is average pooling and ``p -> inf`` max pooling. Inputs are clamped at ``eps`` so the power is defined.

    Example:
        >>> GeM()(torch.ones(2, 8, 4, 4)).shape
        torch.Size([2, 8])
    """

    def __init__(self, p: float = 3.0, eps: float = 1e-6) -> None:
        super().__init__()
        if p <= 0:
            raise ValueError(f"GeM exponent `p` must be > 0, got {p}.")
        self.p = nn.Parameter(torch.tensor(float(p)))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        return x.clamp(min=self.eps).pow(self.p).mean(dim=(-2, -1)).pow(1.0 / self.p)


class GlobalPool(nn.Module):
    """Pool a ``[B, C, H, W]`` feature map or a ``[B, T, C]`` token sequence to ``[B, C]``.

    Args:
        kind: ``avg`` | ``max`` | ``gem`` over spatial positions (or over the non-prefix tokens of a transformer),
            or ``token``: the first (CLS) token of a ViT/DeiT.
        num_prefix_tokens: tokens (CLS, distillation) that ``avg``/``max`` skip on token sequences.

    Example:
        >>> GlobalPool("token")(torch.arange(12.0).view(1, 3, 4)).tolist()
        [[0.0, 1.0, 2.0, 3.0]]
    """

    def __init__(self, kind: PoolingName = "avg", num_prefix_tokens: int = 1, gem_p: float = 3.0) -> None:
        super().__init__()
        if kind not in ("avg", "max", "gem", "token"):
            raise ValueError(f"`pooling` must be one of 'avg', 'max', 'gem', 'token', got {kind!r}.")
        self.kind = kind
        self.num_prefix_tokens = num_prefix_tokens
        self.gem = GeM(gem_p) if kind == "gem" else None

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim == 3:
            return self._pool_tokens(x)
        if x.ndim != 4:
            raise ValueError(f"Expected backbone features [B, C, H, W] or [B, T, C], got {tuple(x.shape)}.")
        if self.kind == "token":
            raise ValueError("`pooling: token` needs a transformer backbone (ViT/DeiT); use avg, max or gem here.")
        if self.gem is not None:
            return self.gem(x)
        return x.mean(dim=(-2, -1)) if self.kind == "avg" else x.amax(dim=(-2, -1))

    def _pool_tokens(self, x: Tensor) -> Tensor:
        if self.kind == "token":
            return x[:, 0]
        patches = x[:, self.num_prefix_tokens :]
        if self.gem is not None:
            return self.gem(patches.transpose(1, 2)[..., None])
        return patches.mean(dim=1) if self.kind == "avg" else patches.amax(dim=1)
