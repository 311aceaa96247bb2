"""CSL, the cross-scale proxy loss of Sun et al. ("Dynamic Metric Learning", CVPR 2021), a HAPPIER baseline."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from ranklit._checks import check_positive
from ranklit.functional import csl_loss
from ranklit.functional.inputs import RetrievalInputs, check_hierarchy
from ranklit.functional.losses.hyperparameters import check_class_ids
from ranklit.losses._cluster import check_proxy_dimension, require_proxies, sized_proxies
from ranklit.losses._registry import register_loss
from ranklit.losses.base import EmbeddingLoss

__all__ = ["CSLLoss"]


@register_loss(
    summary="cross-scale margin softmax",
    paper="Sun et al., CVPR 2021",
    examples={"": {"margins": (0.25, 0.35)}},
    proxy=True,
)
class CSLLoss(EmbeddingLoss):
    """Cross-Scale Learning: one proxy per fine class, a margin softmax per hierarchy level (see
    :func:`ranklit.functional.csl_loss`)::

        L = sum_h mean_i log(1 + sum_{z: c_h(z) != c_h(y_i)} exp(scale * (s_z - s_{y_i} + m_h)))

    Level ``h`` needs each proxy's label at column ``h``. The module keeps them in the ``class_labels`` buffer
    (``[num_classes, L]``, saved in checkpoints): column 0 is the class id itself, coarser columns are learnt from
    every batch (the hierarchy is consistent, so a fine class has one parent) or set at once with
    :meth:`register_hierarchy` (e.g. from the training set's labels). Until its coarse labels are known, a proxy only
    serves as a negative at the fine level. Under DDP, buffers are broadcast from rank 0 at every step, so register the
    whole hierarchy up front to give every rank the same negatives. Embeddings are L2-normalised first unless
    ``normalize=False``; proxies are
    normalised on the fly and need their own learning rate (the module's parameters). ``ref_*`` arguments are
    ignored. Cost ``O(B C (D + L))``.

    Args:
        num_classes: number of fine training classes ``C``; labels' column 0 must lie in ``[0, C)``. ``None``
            (with ``embedding_dim``): set by :meth:`setup_classes` (``RetrievalModule`` does it before training).
        embedding_dim: embedding dimension ``D``; ``None``: as ``num_classes``.
        margins: one margin per label column, finest first (DyML, three levels: 0.25, 0.35, 0.45).
        scale: logit scale (32).
        normalize: L2-normalise the embeddings first (default ``True``).

    Example:
        >>> import torch
        >>> _ = torch.manual_seed(0)
        >>> loss = CSLLoss(num_classes=4, embedding_dim=8, margins=(0.25, 0.35))
        >>> round(loss(torch.randn(4, 8), torch.tensor([[0, 0], [1, 0], [2, 1], [3, 1]])).item(), 4)
        43.6725
        >>> loss.class_labels.tolist()
        [[0, 0], [1, 0], [2, 1], [3, 1]]
    """

    class_labels: Tensor | None
    proxies: nn.Parameter | None
    queries_only = True

    def __init__(
        self,
        num_classes: int | None = None,
        embedding_dim: int | None = None,
        margins: Sequence[float] = (0.25, 0.35, 0.45),
        scale: float = 32.0,
        normalize: bool = True,
    ) -> None:
        super().__init__(normalize=normalize)
        if len(margins) == 0:
            raise ValueError("`margins` must hold one margin per label column, got an empty sequence.")
        self.margins = tuple(float(m) for m in margins)
        self.scale = check_positive("scale", scale)
        self.num_classes = num_classes
        self.proxies = sized_proxies(None, num_classes, embedding_dim, "CSLLoss")
        self.register_buffer("class_labels", None if num_classes is None else self._unknown_hierarchy(num_classes))

    def _unknown_hierarchy(self, num_classes: int) -> Tensor:
        class_labels = torch.full((num_classes, len(self.margins)), -1, dtype=torch.long)
        class_labels[:, 0] = torch.arange(num_classes)
        return class_labels

    def setup_classes(self, num_classes: int, embedding_dim: int) -> None:
        """Create the proxies and the ``class_labels`` buffer if the loss was built without sizes (else nothing)."""
        if self.proxies is None:
            self.proxies = sized_proxies(None, num_classes, embedding_dim, "CSLLoss")
            device = require_proxies(self.proxies, "CSLLoss").device
            self.class_labels = self._unknown_hierarchy(num_classes).to(device)
            self.num_classes = num_classes

    @torch.no_grad()
    def register_hierarchy(self, labels: Tensor) -> None:
        """Record the coarse labels of the fine classes found in ``labels`` ``[N, L]`` (column 0 = fine class id).

        Raises ``ValueError`` if the label columns do not match ``margins`` or contradict the known hierarchy.
        """
        require_proxies(self.proxies, "CSLLoss")
        assert self.class_labels is not None and self.num_classes is not None  # made with the proxies
        labels = labels.to(self.class_labels.device).long()
        if labels.ndim != 2 or labels.shape[1] != len(self.margins):
            raise ValueError(
                f"CSLLoss has {len(self.margins)} margins, one per label column, but got labels of shape "
                f"{tuple(labels.shape)}: pass `margins` with one value per level, finest first."
            )
        check_class_ids(labels[:, 0], self.num_classes)
        check_hierarchy(labels)
        known = self.class_labels[labels[:, 0]]
        conflict = (known >= 0) & (known != labels)
        if conflict.any():
            row = int(conflict.any(dim=1).nonzero()[0])
            raise ValueError(
                f"`labels` give fine class {int(labels[row, 0])} the labels {labels[row].tolist()}, but it was seen "
                f"before with {known[row].tolist()}: the hierarchy must be the same in every batch."
            )
        self.class_labels[labels[:, 0]] = labels

    def embedding_loss(self, inputs: RetrievalInputs) -> Tensor:
        """Loss of the queries with ``[B, L]`` labels (the retrieval set is not used); learns their hierarchy."""
        proxies = require_proxies(self.proxies, "CSLLoss")
        check_proxy_dimension(inputs.queries, proxies)
        self.register_hierarchy(inputs.query_labels)
        assert self.class_labels is not None  # created together with the proxies
        return csl_loss(inputs.queries, inputs.query_labels, proxies, self.class_labels, self.margins, self.scale)

    def extra_repr(self) -> str:
        dim = None if self.proxies is None else self.proxies.shape[1]
        return f"num_classes={self.num_classes}, embedding_dim={dim}, margins={self.margins}, scale={self.scale}"
