"""Shared plumbing of the ranking losses: validation, scores, exclusion mask and positives.

A loss module is called as ``loss(embeddings, labels, *, ref_embeddings=None, ref_labels=None, ids=None,
ref_ids=None)``, a signature that :meth:`EmbeddingLoss.forward` alone defines. The base classes here validate the call
(:func:`ranklit.functional.inputs.prepare_inputs`), compute the cosine scores ``queries @ refs.T`` in the computation
dtype (float64 stays float64; float32, bfloat16 and float16 are computed in float32), build the ``[Q, N]`` mask of the
items each query ranks, and hand them to a hook:

- :class:`EmbeddingLoss` -> ``embedding_loss(inputs)``: the validated
  :class:`ranklit.functional.inputs.RetrievalInputs` only (proxy losses, which score against their own parameters,
  with ``queries_only = True``; combinations of losses).
- :class:`RetrievalLoss` -> ``retrieval_loss(scores, inputs, valid)``: the most general hook, with every label
  column. Hierarchical losses override it and derive the ``[Q, N]`` levels from ``inputs``
  (``levels_between(inputs.query_labels, inputs.ref_labels)``, ``inputs.num_levels``; [spec §0][spec-conventions]).
- :class:`BinaryRetrievalLoss` -> ``binary_loss(scores, positives, valid)``: positives share the query's finest
  label (column 0); a batch where no query has a positive raises ``ValueError``. Losses that need more than the
  masks (class ids, the embedding dimension) override ``retrieval_loss`` and call :func:`binary_positives`.

Every loss L2-normalises the embeddings first (``normalize=True``, the default; gradients flow through the
normalisation), so raw network features give cosine scores; ``normalize=False``: raw dot products
([spec §0][spec-conventions]).
Losses that rank (smooth-rank, binned, H-AP) accept ``include_self``: ``True`` keeps each query in its own ranking, as
the authors' released code does (with normalised embeddings its score 1 puts it at rank 1 as a positive); the default
``False`` excludes it (the papers' definition).
"""

from __future__ import annotations

import inspect
from typing import ClassVar

import torch
from torch import Tensor, nn

from ranklit._checks import check_flag
from ranklit.errors import UserError
from ranklit.functional.floating_point import full_precision
from ranklit.functional.inputs import RetrievalInputs, prepare_inputs
from ranklit.functional.losses.contract import require_positive_queries
from ranklit.functional.reducers import Reducer, get_reducer

__all__ = ["EmbeddingLoss", "RetrievalLoss", "BinaryRetrievalLoss", "binary_positives", "checked_reducer"]


def checked_reducer(reducer: str | Reducer) -> str | Reducer:
    """``reducer`` as given (a name of :data:`ranklit.functional.reducers.REDUCERS` or a
    :class:`~ranklit.functional.Reducer`), after checking it: what a loss module stores (its ``repr`` shows the name).

    >>> checked_reducer("class_balanced")
    'class_balanced'
    """
    get_reducer(reducer)
    return reducer


def binary_positives(inputs: RetrievalInputs, valid: Tensor, *, require: bool = True) -> Tensor:
    """``[Q, N]`` bool: the item is in the query's ranking and shares its finest label (column 0).

    Raises ``ValueError`` (pointing at the P x K sampler) when no query has a positive, if ``require``.
    """
    positives = (inputs.query_labels[:, :1] == inputs.ref_labels[:, 0][None, :]) & valid
    if require:
        require_positive_queries(positives)
    return positives


class EmbeddingLoss(nn.Module):
    """Base class of every ranklit loss: ``loss(embeddings, labels, *, ref_embeddings, ref_labels, ids, ref_ids)``.

    It fixes the call that :class:`ranklit.models.RetrievalModule` makes (and the type the ``ranklit`` CLI accepts
    for ``model.loss``) and owns it: :meth:`forward` validates the call with
    :func:`ranklit.functional.inputs.prepare_inputs` (L2-normalising the embeddings unless ``normalize=False``) and
    hands the :class:`ranklit.functional.inputs.RetrievalInputs` to :meth:`embedding_loss`, the one hook a subclass
    implements. Ranking losses derive from :class:`RetrievalLoss`, whose hook receives the scores as well; losses
    that only involve the queries (proxy losses) set ``queries_only = True``: the ``ref_*`` and id arguments are then
    accepted for a uniform call and ignored.

    Args:
        normalize: L2-normalise the embeddings (and ``ref_embeddings``) first (default ``True``; ``False``: raw dot
            products).

    Example:
        >>> import torch
        >>> class MeanNorm(EmbeddingLoss):
        ...     def embedding_loss(self, inputs):
        ...         return inputs.queries.norm(dim=1).mean()
        >>> MeanNorm(normalize=False)(torch.full((2, 4), 1.0), torch.tensor([0, 1])).item()
        2.0
    """

    queries_only: ClassVar[bool] = False

    def __init__(self, *, normalize: bool = True) -> None:
        super().__init__()
        if hook := _unimplemented_hook(type(self)):
            raise TypeError(
                f"{type(self).__name__} does not implement `{hook}`: it is a base class to subclass (docs: Extending "
                f"ranklit); use one of the losses of ranklit.losses (e.g. ROADMAPLoss), or implement `{hook}`."
            )
        self.normalize = check_flag("normalize", normalize)

    @full_precision  # under autocast too, the loss runs in float32 (float64 stays): docs/spec.md §0
    def forward(
        self,
        embeddings: Tensor,
        labels: Tensor,
        *,
        ref_embeddings: Tensor | None = None,
        ref_labels: Tensor | None = None,
        ids: Tensor | None = None,
        ref_ids: Tensor | None = None,
    ) -> Tensor:
        """Scalar loss of the queries ``embeddings`` ``[B, D]`` with ``labels`` ``[B]`` or ``[B, L]``.

        Args:
            embeddings: ``[B, D]`` float query embeddings (float64 is computed in float64, narrower types in float32).
            labels: ``[B]`` or ``[B, L]`` integer labels, column 0 the finest level.
            ref_embeddings: ``[N, D]`` retrieval set the queries rank (DDP gather, memory bank); ``None``: the batch.
            ref_labels: ``[N]`` or ``[N, L]`` labels of the retrieval set, with ``ref_embeddings``.
            ids: ``[B]`` integer sample ids of the queries: an item with a query's id is removed from its ranking
                (without ``ref_embeddings``: the batch position by default).
            ref_ids: ``[N]`` integer sample ids of the retrieval set (with ``ref_embeddings``: ``ids`` and
                ``ref_ids`` together, or neither: nothing removed).

        Raises:
            ValueError: bad inputs (:func:`ranklit.functional.inputs.prepare_inputs`), and queries ``embeddings``
                that are all zero. That is an error, not a warning: every score is then 0 (a zero vector has no
                direction to normalise), so the loss is one constant whatever the labels and ranks nothing; it
                comes from a collapsed network or a placeholder tensor, and a warning repeated at every step of a
                run that cannot learn would be read too late.
        """
        if self.queries_only:
            inputs = prepare_inputs(embeddings, labels, normalize=self.normalize)
        else:
            inputs = prepare_inputs(
                embeddings, labels, ref_embeddings=ref_embeddings, ref_labels=ref_labels, ids=ids, ref_ids=ref_ids,
                normalize=self.normalize,
            )
        if not embeddings.detach().any():  # validated above: a non-empty float [B, D]
            raise UserError(
                f"`embeddings` {list(embeddings.shape)} are all zero: every score is 0, so {type(self).__name__} is "
                "the same constant whatever the labels (it ranks nothing). Check the network's output (a head whose "
                "weights and bias are 0, features that are all 0), or pass real embeddings."
            )
        return self.embedding_loss(inputs)

    def embedding_loss(self, inputs: RetrievalInputs) -> Tensor:
        """Loss from the validated ``inputs``: queries and retrieval set in the computation dtype, ``[*, L]`` labels."""
        raise NotImplementedError


class RetrievalLoss(EmbeddingLoss):
    """Base class of the losses that rank a retrieval set for each query.

    Subclasses implement :meth:`retrieval_loss`. Without ``ref_embeddings`` every batch item is a query ranking the
    rest of the batch; with them, queries rank the given retrieval set (DDP gather, memory bank) and an item is
    removed from a query's ranking when ``ref_ids`` equals the query's ``ids`` (pass both or neither).

    Cost: the scores take ``O(Q N D)`` time and ``O(Q N)`` memory on top of the subclass's own cost.

    Args:
        normalize: L2-normalise the embeddings (and ``ref_embeddings``) before scoring (default ``True``).
        include_self: keep each query in its own ranking (authors' code; default ``False``). With
            ``ref_embeddings`` the query is kept when an item with its id is in the retrieval set.

    Example:
        >>> import torch
        >>> class MeanScore(RetrievalLoss):
        ...     def retrieval_loss(self, scores, inputs, valid):
        ...         return scores[valid].mean()
        >>> emb = torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]])
        >>> round(MeanScore()(emb, torch.tensor([0, 1, 2])).item(), 4)
        0.4667
    """

    def __init__(self, *, normalize: bool = True, include_self: bool = False) -> None:
        super().__init__(normalize=normalize)
        self.include_self = check_flag("include_self", include_self)

    def embedding_loss(self, inputs: RetrievalInputs) -> Tensor:
        """The ``[Q, N]`` scores ``queries @ refs.T`` and ranking mask, handed to :meth:`retrieval_loss`."""
        scores = inputs.queries @ inputs.refs.T
        excluded = None if self.include_self else inputs.self_pairs()
        valid = torch.ones_like(scores, dtype=torch.bool) if excluded is None else ~excluded
        return self.retrieval_loss(scores, inputs, valid)

    def retrieval_loss(self, scores: Tensor, inputs: RetrievalInputs, valid: Tensor) -> Tensor:
        """Loss from the ``[Q, N]`` ``scores``, the validated ``inputs`` and the ``[Q, N]`` bool ``valid`` mask."""
        raise NotImplementedError

    def extra_repr(self) -> str:
        """The constructor arguments stored under their own name or in an ``options`` dataclass, e.g.
        ``tau=0.01, rho=100.0``."""
        shown = []
        for name in inspect.signature(type(self).__init__).parameters:
            store = next((s for s in (self, getattr(self, "options", None)) if hasattr(s, name)), None)
            if name != "self" and store is not None:
                shown.append(f"{name}={getattr(store, name)!r}")
        return ", ".join(shown)


class BinaryRetrievalLoss(RetrievalLoss):
    """Base class of the binary losses: an item is a positive when it shares the query's finest label (column 0).

    Subclasses implement :meth:`binary_loss`. Queries without a positive are skipped by the functional forms; a batch
    where no query has one raises ``ValueError`` pointing at the P x K sampler.

    Example:
        >>> import torch
        >>> class PositiveGap(BinaryRetrievalLoss):
        ...     def binary_loss(self, scores, positives, valid):
        ...         return 1 - scores[positives].mean()
        >>> emb = torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]])
        >>> round(PositiveGap()(emb, torch.tensor([0, 0, 1])).item(), 4)
        0.4
    """

    def retrieval_loss(self, scores: Tensor, inputs: RetrievalInputs, valid: Tensor) -> Tensor:
        return self.binary_loss(scores, binary_positives(inputs, valid), valid)

    def binary_loss(self, scores: Tensor, positives: Tensor, valid: Tensor) -> Tensor:
        """Loss from ``[Q, N]`` scores and the bool ``positives`` (subset of ``valid``) and ``valid`` masks."""
        raise NotImplementedError


def _unimplemented_hook(cls: type) -> str | None:
    """The hook a loss class leaves to a subclass (``embedding_loss``, ``retrieval_loss``, ``binary_loss``), the one
    its ``forward`` would reach and find unimplemented; ``None`` for a complete loss."""
    if cls.forward is not EmbeddingLoss.forward:  # type: ignore[attr-defined]
        return None
    hooks = (
        (EmbeddingLoss, "embedding_loss", None),
        (RetrievalLoss, "retrieval_loss", (RetrievalLoss, "embedding_loss")),
        (BinaryRetrievalLoss, "binary_loss", (BinaryRetrievalLoss, "retrieval_loss")),
    )
    for base, hook, caller in hooks:
        if not issubclass(cls, base):
            break
        reached = caller is None or getattr(cls, caller[1]) is getattr(caller[0], caller[1])
        if reached and getattr(cls, hook) is getattr(base, hook):
            return hook
    return None
