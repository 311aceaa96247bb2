"""Proxy-based baselines: :class:`NormSoftmaxLoss` (Zhai & Wu, BMVC 2019) and :class:`ProxyNCAPPLoss` (Teh et al.,
ECCV 2020).

Both are a softmax cross-entropy of each embedding against one learnable proxy per fine class, so they reuse
:class:`ranklit.losses.ClusterLoss` (same proxies, validation and call; ``ref_*`` arguments are accepted for a uniform
call and ignored, since only the queries meet the proxies; no positive pair is needed inside the batch). Labels must
hold fine class ids in ``[0, num_classes)`` (``ValueError`` otherwise); embeddings are L2-normalised first unless
``normalize=False``, and the proxies are normalised on the fly. Cost ``O(B C D)`` time, ``O(B C)`` memory.
"""

from __future__ import annotations

from ranklit._checks import check_positive
from ranklit.functional.reducers import Reducer
from ranklit.losses._cluster import ClusterLoss
from ranklit.losses._registry import register_loss

__all__ = ["NormSoftmaxLoss", "ProxyNCAPPLoss"]


@register_loss(summary="normalised softmax over proxies", paper="Zhai & Wu, BMVC 2019", proxy=True)
class NormSoftmaxLoss(ClusterLoss):
    """NormSoftmax (Zhai & Wu, "Classification is a strong baseline for deep metric learning", BMVC 2019)::

        L = mean_i -log softmax_z(<v_i, p_z / |p_z|> / temperature)[y_i]

    Args:
        num_classes: number of fine training classes (``None``: set at fit time, see :class:`ClusterLoss`).
        embedding_dim: embedding dimension (``None``: likewise).
        temperature: softmax temperature (0.05).
        reducer: what the per-embedding cross-entropies go to (``"mean"``, default; see :class:`ClusterLoss`).
        normalize: L2-normalise the embeddings first (default ``True``).

    Example:
        >>> import torch
        >>> _ = torch.manual_seed(0)
        >>> loss = NormSoftmaxLoss(num_classes=3, embedding_dim=4)
        >>> round(loss(torch.randn(6, 4), torch.tensor([0, 0, 1, 1, 2, 2])).item(), 4)
        5.9906
    """


@register_loss(summary="ProxyNCA++", paper="Teh et al., ECCV 2020", proxy=True)
class ProxyNCAPPLoss(ClusterLoss):
    """ProxyNCA++ (Teh, DeVries & Taylor, ECCV 2020): a softmax over squared distances to normalised proxies::

        L = mean_i -log( exp(-|v_i - p_y|^2 / T) / sum_z exp(-|v_i - p_z|^2 / T) ),   p_z = proxy_z / |proxy_z|

    with the positive proxy in the denominator (the "++") and ``T = 1/9``. Since
    ``-|v - p|^2 / T = (2 <v, p> - |v|^2 - 1) / T`` and the last two terms are the same for every proxy, this is
    exactly the cosine softmax of :class:`NormSoftmaxLoss` at temperature ``T / 2`` (which is how it is computed).
    The paper's other ingredients (global max pooling, fast-moving proxies) belong to the model and the optimiser.

    Args:
        num_classes: number of fine training classes (``None``: set at fit time, see :class:`ClusterLoss`).
        embedding_dim: embedding dimension (``None``: likewise).
        temperature: ``T`` (1/9) of the squared-distance softmax.
        reducer: what the per-embedding cross-entropies go to (``"mean"``, default; see :class:`ClusterLoss`).
        normalize: L2-normalise the embeddings first (default ``True``; the identity above assumes unit vectors).

    Attributes:
        distance_temperature: ``T``, the ``temperature`` argument (what ``repr`` shows).
        temperature: ``T / 2``, the temperature of the equivalent cosine softmax that :class:`ClusterLoss` computes
            (not the argument: ``ProxyNCAPPLoss(temperature=0.2).temperature == 0.1``).

    Example:
        >>> import torch
        >>> _ = torch.manual_seed(0)
        >>> loss = ProxyNCAPPLoss(num_classes=3, embedding_dim=4)
        >>> round(loss(torch.randn(6, 4), torch.tensor([0, 0, 1, 1, 2, 2])).item(), 4)
        5.4074
    """

    def __init__(
        self,
        num_classes: int | None = None,
        embedding_dim: int | None = None,
        temperature: float = 1.0 / 9.0,
        reducer: str | Reducer = "mean",
        normalize: bool = True,
    ) -> None:
        temperature = check_positive("temperature", temperature)
        super().__init__(num_classes, embedding_dim, temperature / 2.0, reducer=reducer, normalize=normalize)
        self.distance_temperature = temperature

    def extra_repr(self) -> str:
        dim = None if self.proxies is None else self.proxies.shape[1]
        options = f"temperature={self.distance_temperature}, reducer={self.reducer!r}, normalize={self.normalize}"
        return f"num_classes={self.num_classes}, embedding_dim={dim}, {options}"
