"""Clustering loss of HAPPIER (Ramzi et al., ECCV 2022, Eq. 6): one learnable normalised proxy per fine class."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ranklit._checks import check_positive, check_positive_int
from ranklit.functional import cluster_loss
from ranklit.functional.inputs import RetrievalInputs
from ranklit.functional.losses.hyperparameters import check_class_ids
from ranklit.functional.reducers import Reducer
from ranklit.losses._registry import register_loss
from ranklit.losses.base import EmbeddingLoss, checked_reducer

__all__ = ["ClusterLoss", "make_proxies", "sized_proxies"]


def make_proxies(num_classes: int, embedding_dim: int) -> nn.Parameter:
    """``[num_classes, embedding_dim]`` proxies drawn uniformly in ``+-1/sqrt(embedding_dim)`` (as ``nn.Linear``).

    >>> make_proxies(3, 4).shape
    torch.Size([3, 4])
    """
    for name, value in (("num_classes", num_classes), ("embedding_dim", embedding_dim)):
        check_positive_int(name, value)
    bound = 1.0 / math.sqrt(embedding_dim)
    return nn.Parameter(torch.empty(num_classes, embedding_dim).uniform_(-bound, bound))


def sized_proxies(
    proxies: nn.Parameter | None, num_classes: int | None, embedding_dim: int | None, owner: str
) -> nn.Parameter | None:
    """The proxies of a loss given ``num_classes`` and ``embedding_dim``: ``proxies`` if already made, new ones if both
    sizes are known, ``None`` while one is missing (:class:`ranklit.models.RetrievalModule` then sets them from the
    training classes and the network's dimension before training, through ``setup_classes``).

    >>> sized_proxies(None, None, None, "ClusterLoss") is None, sized_proxies(None, 3, 4, "ClusterLoss").shape
    (True, torch.Size([3, 4]))
    """
    if proxies is not None:
        return proxies
    if num_classes is None or embedding_dim is None:
        if (num_classes, embedding_dim) != (None, None):
            raise ValueError(f"{owner}: give both `num_classes` and `embedding_dim`, or neither (set at fit time).")
        return None
    return make_proxies(num_classes, embedding_dim)


def require_proxies(proxies: Tensor | None, owner: str) -> Tensor:
    """The proxies, or a ``ValueError`` saying how to size them."""
    if proxies is None:
        raise ValueError(
            f"{owner} has no proxies yet: pass `num_classes` and `embedding_dim`, or train it with "
            "`ranklit.models.RetrievalModule`, which sets them from the training classes and the network."
        )
    return proxies


def check_proxy_dimension(queries: Tensor, proxies: Tensor) -> None:
    """Raise ``ValueError`` when the embeddings and the proxies have different dimensions."""
    if queries.shape[1] != proxies.shape[1]:
        raise ValueError(
            f"`embeddings` have dimension {queries.shape[1]} but the proxies have {proxies.shape[1]}: "
            "set `embedding_dim` to the model's embedding size."
        )


@register_loss(summary="proxy clustering", paper="HAPPIER, ECCV 2022", proxy=True)
class ClusterLoss(EmbeddingLoss):
    """HAPPIER's clustering loss: cross-entropy of ``<v, p_z> / temperature`` over the normalised fine-class proxies.

    .. math:: L = -\\frac{1}{B} \\sum_i \\log \\frac{\\exp(v_i^T p_{y_i} / \\sigma)}{\\sum_z \\exp(v_i^T p_z / \\sigma)}

    The proxies (a parameter ``proxies`` of shape ``[num_classes, embedding_dim]``) give a reference shared across
    batches. They need their own learning rate (authors: Adam, lr 10 with cosine decay on SOP, 2e-5 on iNaturalist):
    ``ranklit.models.RetrievalModule`` puts every parameter of the loss module in a separate ``"loss"`` param group.
    Embeddings are L2-normalised first unless ``normalize=False``; proxies are normalised on the fly. Only column 0 of
    ``[B, L]`` labels is
    used, and it must hold ids in ``[0, num_classes)``. ``ref_*`` arguments are accepted for a uniform call and
    ignored: the proxy term only involves the queries. Cost ``O(B C D)``.

    Args:
        num_classes: number of fine training classes ``C``; ``None`` (with ``embedding_dim``): set by
            :meth:`setup_classes` (``RetrievalModule`` does it from the training set before training).
        embedding_dim: embedding dimension ``D``; ``None``: as ``num_classes``.
        temperature: ``sigma`` (0.05).
        reducer: what the per-embedding cross-entropies go to: ``"mean"`` (default), ``"class_balanced"``,
            ``"active"``, ``"none"`` (``[B]``) or a :class:`~ranklit.functional.Reducer`.
        normalize: L2-normalise the embeddings first (default ``True``; ``False``: raw dot products with the
            normalised proxies).

    Example:
        >>> import torch
        >>> _ = torch.manual_seed(0)
        >>> loss = ClusterLoss(num_classes=3, embedding_dim=4)
        >>> round(loss(torch.randn(6, 4), torch.tensor([0, 0, 1, 1, 2, 2])).item(), 4)
        5.9906
    """

    proxies: nn.Parameter | None
    queries_only = True

    def __init__(
        self,
        num_classes: int | None = None,
        embedding_dim: int | None = None,
        temperature: float = 0.05,
        reducer: str | Reducer = "mean",
        normalize: bool = True,
    ) -> None:
        super().__init__(normalize=normalize)
        self.num_classes = num_classes
        self.temperature = check_positive("temperature", temperature)
        self.reducer = checked_reducer(reducer)
        self.proxies = sized_proxies(None, num_classes, embedding_dim, type(self).__name__)

    def setup_classes(self, num_classes: int, embedding_dim: int) -> None:
        """Create the ``[num_classes, embedding_dim]`` proxies if the loss was built without sizes (else nothing)."""
        if self.proxies is None:
            self.proxies = sized_proxies(None, num_classes, embedding_dim, type(self).__name__)
            self.num_classes = num_classes

    def embedding_loss(self, inputs: RetrievalInputs) -> Tensor:
        """:meth:`proxy_loss` of the queries (the retrieval set is not used)."""
        return self.proxy_loss(inputs.queries, inputs.query_labels)

    def proxy_loss(self, queries: Tensor, query_labels: Tensor, reducer: str | Reducer | None = None) -> Tensor:
        """Loss of validated ``[B, D]`` queries (computation dtype) with ``[B, L]`` integer labels (``reducer``:
        ``None`` for the module's own)."""
        proxies = require_proxies(self.proxies, type(self).__name__)
        check_proxy_dimension(queries, proxies)
        check_class_ids(query_labels[:, 0], proxies.shape[0])
        reducer = self.reducer if reducer is None else reducer
        return cluster_loss(queries, query_labels[:, 0], proxies, self.temperature, reducer=reducer)

    def extra_repr(self) -> str:
        dim = None if self.proxies is None else self.proxies.shape[1]
        options = f"temperature={self.temperature}, reducer={self.reducer!r}, normalize={self.normalize}"
        return f"num_classes={self.num_classes}, embedding_dim={dim}, {options}"
