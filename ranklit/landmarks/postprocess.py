"""Post-processing of query/gallery descriptors before ranking: learnt whitening, α-QE, database-side augmentation.

Each step is a small object called as ``step(queries, gallery) -> (queries, gallery)`` on L2-normalised descriptors
(scores are dot products); a list of steps is applied in order by :func:`apply_postprocess`. ``queries`` is a
``[Q, D]`` tensor, ``gallery`` a tensor or a :class:`ranklit.index.descriptors.Descriptors` set (e.g. numpy
shards on disk): whitening and α-QE stream over the gallery, so a million-row gallery never sits in memory. They work
for any query/gallery evaluation, e.g. ``retrieval_metrics(*apply_postprocess(steps, q, g), ...)``.

**α-QE** (α-weighted query expansion of Radenović et al., TPAMI 2018, used by Revaud et al. ICCV 2019 §4.3 with
``α = 2, k = 10``): with ``N_k(q)`` the ``k`` gallery descriptors scoring highest against ``q``::

    q' = normalise( q + sum_{g in N_k(q)} max(<q, g>, 0)^α g )

the query itself weighs ``<q, q>^α = 1``; negative similarities are clipped to 0 so that any real α is defined
(``0^0 = 1``: α = 0 is plain average query expansion of the ``k + 1`` descriptors).

**Database-side augmentation** (αDBA, the same on the gallery side): every gallery descriptor is replaced by its
α-QE over the rest of the gallery (its ``k`` nearest *other* gallery rows)::

    g_i' = normalise( g_i + sum_{g_j in N_k(g_i), j != i} max(<g_i, g_j>, 0)^α g_j )

computed from the original descriptors for every row (one pass, not iterated); ``O(N²·D)`` time and the new gallery
in memory (``N·D``), so it is meant for galleries that fit (ROxford/RParis, not R1M).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ranklit._checks import check_positive_int
from ranklit.index import Descriptors, MappedDescriptors, as_descriptors, open_descriptors, top_k
from ranklit.landmarks._whitening import Whitening, learn_whitening

__all__ = [
    "PostProcessStep",
    "LearntWhitening",
    "AlphaQueryExpansion",
    "DatabaseAugmentation",
    "alpha_query_expansion",
    "apply_postprocess",
]


def _check_alpha_k(alpha: float, k: int) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or alpha < 0:
        raise ValueError(f"`alpha` must be a number >= 0 (the paper uses 2), got {alpha!r}.")
    check_positive_int("k", k, " number of neighbours (the paper uses 10)")


def alpha_query_expansion(
    queries: Tensor, gallery: Tensor | Descriptors, *, alpha: float = 2.0, k: int = 10, exclude: Tensor | None = None
) -> Tensor:
    """``normalise(q + sum_{g in N_k(q)} max(<q, g>, 0)^alpha g)`` for each row ``q`` of ``queries`` (see the module).

    Args:
        queries: ``[Q, D]`` L2-normalised descriptors.
        gallery: ``[N, D]`` L2-normalised gallery (tensor or descriptor set, streamed).
        alpha: exponent of the similarity weights.
        k: neighbours added (all of them when the gallery is smaller).
        exclude: ``[Q]`` gallery row that is not a neighbour of each query (the query itself in DBA).

    Example:
        >>> q = torch.tensor([[1.0, 0.0]])
        >>> g = torch.tensor([[0.6, 0.8], [0.0, 1.0]])
        >>> alpha_query_expansion(q, g, alpha=2.0, k=1)  # q + 0.6^2 * g_0, normalised
        tensor([[0.9731, 0.2305]])
    """
    _check_alpha_k(alpha, k)
    scores, index = top_k(queries, gallery, k, exclude=exclude)
    neighbours = as_descriptors(gallery).take(index).to(queries.device, queries.dtype)  # [Q, k, D]
    weights = scores.clamp(min=0) ** alpha
    expanded = queries + (weights[:, :, None] * neighbours).sum(1)
    return torch.nn.functional.normalize(expanded, dim=1)


class PostProcessStep:
    """A post-processing step: ``step(queries, gallery) -> (queries, gallery)``.

    :meth:`prepare` receives the training descriptors of the evaluation (if any) before the first call; only steps
    that learn from them (:class:`LearntWhitening`) use it.
    """

    def prepare(self, training: Tensor | Descriptors | None) -> None:
        """Learn what the step needs from training descriptors (default: nothing)."""

    def __call__(self, queries: Tensor, gallery: Tensor | Descriptors) -> tuple[Tensor, Tensor | Descriptors]:
        raise NotImplementedError


class LearntWhitening(PostProcessStep):
    """Apply a PCA whitening (:func:`ranklit.landmarks.learn_whitening`) to queries and gallery.

    ``x' = normalise((x - mu) P)`` (see :mod:`ranklit.landmarks._whitening`); on a descriptor set the gallery is
    whitened chunk by chunk as it is read.

    Args:
        descriptors: a descriptor folder written by ``ranklit predict`` (or a ``.npy`` file of a ``[N, D]``
            array) to learn from; ``None``: the training descriptors the evaluation passes to :meth:`prepare` (e.g. the
            ``whitening_dataset`` of :class:`ranklit.landmarks.RevisitedTestSet`).
        power: eigenvalue exponent (0.25: square-rooted PCA of the paper; 0.5: full whitening).
        dim: components kept (``None``: all).
        whitening: an already learnt :class:`ranklit.landmarks._whitening.Whitening` (from Python).

    Example:
        >>> train = torch.tensor([[2.0, 0.0], [-2.0, 0.0], [0.0, 0.5], [0.0, -0.5]])
        >>> step = LearntWhitening(power=0.5)
        >>> step.prepare(train)
        >>> q, g = step(torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]]))
        >>> q.abs().tolist(), g.abs().tolist()
        ([[1.0, 0.0]], [[0.0, 1.0]])
    """

    def __init__(
        self,
        descriptors: str | None = None,
        power: float = 0.25,
        dim: int | None = None,
        *,
        whitening: Whitening | None = None,
    ) -> None:
        self.descriptors, self.power, self.dim = descriptors, power, dim
        self.whitening, self._given = whitening, whitening
        self._source: Descriptors | None = None
        if descriptors is not None:  # checked now, not after the test set has been embedded
            try:
                self._source = open_descriptors(descriptors)
            except FileNotFoundError as error:
                raise FileNotFoundError(f"LearntWhitening(descriptors={descriptors!r}): {error}") from None

    def prepare(self, training: Tensor | Descriptors | None) -> None:
        """Learn the whitening: once from ``descriptors``, else anew from each evaluation's ``training``."""
        if self._given is not None or (self._source is not None and self.whitening is not None):
            return
        if self._source is not None:
            training = self._source
        if training is None:
            raise ValueError(
                "LearntWhitening has nothing to learn from: give `descriptors` (a folder written by `ranklit predict` "
                "on the training images) or a `whitening_dataset` in the evaluated test set."
            )
        self.whitening = learn_whitening(training, power=self.power, dim=self.dim)

    def __call__(self, queries: Tensor, gallery: Tensor | Descriptors) -> tuple[Tensor, Tensor | Descriptors]:
        if self.whitening is None:
            self.prepare(None)
        whiten = self.whitening
        assert whiten is not None  # set by prepare, which raises otherwise
        if isinstance(gallery, Tensor):
            return whiten(queries), whiten(gallery)
        return whiten(queries), MappedDescriptors(gallery, whiten, whiten.projection.shape[1])


class AlphaQueryExpansion(PostProcessStep):
    """α-QE: each query becomes ``normalise(q + sum_{g in N_k(q)} max(<q, g>, 0)^alpha g)``; the gallery is unchanged.

    Args:
        alpha: similarity exponent (Revaud et al. §4.3: 2).
        k: number of gallery neighbours (Revaud et al. §4.3: 10).

    Example:
        >>> q, g = AlphaQueryExpansion(alpha=2.0, k=1)(torch.tensor([[1.0, 0.0]]), torch.tensor([[0.6, 0.8]]))
        >>> q
        tensor([[0.9731, 0.2305]])
    """

    def __init__(self, alpha: float = 2.0, k: int = 10) -> None:
        _check_alpha_k(alpha, k)
        self.alpha, self.k = alpha, k

    def __call__(self, queries: Tensor, gallery: Tensor | Descriptors) -> tuple[Tensor, Tensor | Descriptors]:
        return alpha_query_expansion(queries, gallery, alpha=self.alpha, k=self.k), gallery


class DatabaseAugmentation(PostProcessStep):
    """αDBA: each gallery row becomes ``normalise(g_i + sum_{j in N_k(g_i), j != i} max(<g_i, g_j>, 0)^alpha g_j)``.

    The queries are unchanged. Time ``O(N²·D)``, the augmented gallery in memory (module docstring).

    Args:
        alpha: similarity exponent.
        k: number of other gallery rows added to each.
        chunk_rows: gallery rows augmented at a time.

    Example:
        >>> _, g = DatabaseAugmentation(alpha=1.0, k=1)(torch.zeros(1, 2), torch.tensor([[1.0, 0.0], [0.6, 0.8]]))
        >>> g  # each row plus 0.6 times the other one, normalised
        tensor([[0.9430, 0.3328],
                [0.8321, 0.5547]])
    """

    def __init__(self, alpha: float = 2.0, k: int = 10, chunk_rows: int = 4096) -> None:
        _check_alpha_k(alpha, k)
        self.alpha, self.k, self.chunk_rows = alpha, k, chunk_rows

    def __call__(self, queries: Tensor, gallery: Tensor | Descriptors) -> tuple[Tensor, Tensor | Descriptors]:
        source = as_descriptors(gallery)
        parts, start = [], 0
        for chunk in source.chunks(self.chunk_rows):
            rows = torch.arange(start, start + chunk.shape[0], device=chunk.device)
            parts.append(alpha_query_expansion(chunk, source, alpha=self.alpha, k=self.k, exclude=rows))
            start += chunk.shape[0]
        return queries, torch.cat(parts) if parts else source.tensor()


def apply_postprocess(
    steps: Sequence[PostProcessStep],
    queries: Tensor,
    gallery: Tensor | Descriptors,
    training: Tensor | Descriptors | None = None,
) -> tuple[Tensor, Tensor | Descriptors]:
    """Apply ``steps`` in order (each first :meth:`~PostProcessStep.prepare`-d with ``training``).

    Example:
        >>> q, g = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.6, 0.8], [0.0, 1.0]])
        >>> apply_postprocess([AlphaQueryExpansion(k=1)], q, g)[0]
        tensor([[0.9731, 0.2305]])
    """
    for step in steps:
        step.prepare(training)
        queries, gallery = step(queries, gallery)
    return queries, gallery
