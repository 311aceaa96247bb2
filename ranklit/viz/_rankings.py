"""Top-k retrieval and the ranking grid: queries and their top-k images framed by how relevant each one is.

The picture retrieval papers show (ROADMAP Fig. 1, 6, 7; HAPPIER Fig. 1, 6): each row a query and its top-k
neighbours, framed **green** (same fine class), **orange** (same coarser class only) or **red** (unrelated). Several
rankings of the same queries (two checkpoints) can be drawn side by side.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from torch import Tensor
from torch.utils.data import Dataset

from ranklit.functional.inputs import excluded_pairs, levels_between, prepare_inputs
from ranklit.viz._images import to_display

__all__ = ["Retrieved", "retrieve", "ranking_grid", "level_colour", "dataset_images"]

_GREEN, _ORANGE, _RED, _QUERY, _GREY = "#2ca02c", "#ff7f0e", "#d62728", "#1f3b73", "#7f7f7f"


@dataclass(frozen=True)
class Retrieved:
    """The top-k of each query.

    Attributes:
        indices: ``[Q, k]`` positions of the retrieved items in the retrieval set, best first.
        scores: ``[Q, k]`` cosine similarities.
        levels: ``[Q, k]`` level of each retrieved item w.r.t. its query ([spec §0][spec-conventions]): ``L`` = same
            fine class, ``0`` = nothing in common.
        num_levels: ``L``, the number of label columns; 0 for unlabelled items (grey frames, no legend).
    """

    indices: Tensor
    scores: Tensor
    levels: Tensor
    num_levels: int


def retrieve(
    embeddings: Tensor,
    labels: Tensor,
    *,
    ref_embeddings: Tensor | None = None,
    ref_labels: Tensor | None = None,
    ids: Tensor | None = None,
    ref_ids: Tensor | None = None,
    top_k: int = 5,
) -> Retrieved:
    """Rank the retrieval set for each query by cosine similarity and keep the ``top_k`` best items.

    Same conventions as the losses and metrics: without ``ref_embeddings`` the queries rank each other, each without
    itself; with it, an item whose id equals the query's id is left out. Ties are broken by position.

    Args:
        embeddings: ``[Q, D]`` L2-normalised query embeddings.
        labels: ``[Q]`` or ``[Q, L]`` labels, column 0 finest.
        ref_embeddings, ref_labels, ids, ref_ids: the retrieval set and the ids, as in
            :func:`ranklit.functional.retrieval_metrics`.
        top_k: items kept per query; at most the size of the retrieval set minus the excluded items.

    Cost: one ``[Q, D] x [D, N]`` product and a top-k, ``O(Q N)`` memory: meant for a handful of queries.

    Example:
        >>> e = torch.nn.functional.normalize(torch.tensor([[1.0, 0.0], [0.8, 0.2], [0.0, 1.0]]), dim=1)
        >>> r = retrieve(e, torch.tensor([[0, 0], [1, 0], [2, 1]]), top_k=2)
        >>> r.indices.tolist(), r.levels.tolist()
        ([[1, 2], [0, 2], [1, 0]], [[1, 0], [1, 0], [0, 0]])
    """
    x = prepare_inputs(
        embeddings, labels, ref_embeddings=ref_embeddings, ref_labels=ref_labels, ids=ids, ref_ids=ref_ids
    )
    scores = x.queries.detach() @ x.refs.detach().T
    excluded = excluded_pairs(x.query_ids, x.ref_ids, scores.shape[1])
    available = scores.shape[1] - (int(excluded.sum(1).max()) if excluded is not None else 0)
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= available:
        raise ValueError(
            f"`top_k` must be an integer in 1..{available} (the retrieval set without the excluded items), "
            f"got {top_k!r}; lower it or give a larger retrieval set."
        )
    if excluded is not None:
        scores = scores.masked_fill(excluded, float("-inf"))
    best, indices = scores.topk(top_k, dim=1)
    levels = levels_between(x.query_labels, x.ref_labels).gather(1, indices)
    return Retrieved(indices=indices, scores=best, levels=levels, num_levels=x.num_levels)


def level_colour(level: int, num_levels: int) -> str:
    """Frame colour of an item at ``level``: green = same fine class, orange = a coarser class only, red = none;
    grey when there are no labels (``num_levels = 0``: a search index's images).

    >>> level_colour(2, 2), level_colour(1, 2), level_colour(0, 2), level_colour(0, 0)
    ('#2ca02c', '#ff7f0e', '#d62728', '#7f7f7f')
    """
    if num_levels == 0:
        return _GREY
    return _GREEN if level >= num_levels else (_ORANGE if level > 0 else _RED)


def dataset_images(dataset: Dataset, indices: Tensor | Sequence[int]) -> Tensor:
    """Stack ``dataset[i]["image"]`` for the given indices (ranklit datasets return ``{"image", "label", "index"}``).

    Only the requested items are loaded, so it is cheap for a few queries of a large dataset.
    """
    flat = torch.as_tensor(indices).reshape(-1)
    images = torch.stack([torch.as_tensor(dataset[int(i)]["image"]) for i in flat])
    return images.reshape(*torch.as_tensor(indices).shape, *images.shape[1:])


def _frame(ax: Axes, image: np.ndarray, colour: str, width: float) -> None:
    ax.imshow(image, interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_edgecolor(colour)
        spine.set_linewidth(width)


def ranking_grid(
    query_images: Tensor,
    retrieved: Retrieved | Sequence[Retrieved],
    ref_images: Tensor | Callable[[Tensor], Tensor],
    *,
    titles: Sequence[str] | None = None,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
    show_scores: bool = True,
    cell_inches: float = 1.1,
) -> Figure:
    """Draw each query and its top-k, framed green / orange / red; several rankings side by side (HAPPIER Fig. 6).

    Args:
        query_images: ``[Q, C, H, W]`` images of the queries (``uint8``, or floats normalised with ``mean``/``std``).
        retrieved: one :class:`Retrieved` or a list of them (e.g. two checkpoints), all for the same ``Q`` queries.
        ref_images: the retrieval set's images ``[N, C, H, W]``, or a function mapping a tensor of positions to
            their images (e.g. ``lambda i: dataset_images(dataset, i)``) so that only the shown items are loaded.
        titles: one title per ranking (e.g. the checkpoints' names).
        mean, std: the normalisation to undo on float images; ``None`` rescales each image to its own range.
        show_scores: write each retrieved item's cosine similarity under it.
        cell_inches: side of one image in inches.

    Returns:
        A ``matplotlib.figure.Figure`` (no pyplot state; works with the ``Agg`` backend).

    Example:
        >>> e = torch.nn.functional.normalize(torch.randn(6, 4), dim=1)
        >>> r = retrieve(e[:2], torch.tensor([0, 1]), ref_embeddings=e, ref_labels=torch.tensor([0, 0, 1, 1, 2, 2]),
        ...              ids=torch.tensor([0, 1]), ref_ids=torch.arange(6), top_k=3)
        >>> images = torch.randint(0, 256, (6, 3, 8, 8), dtype=torch.uint8)
        >>> len(ranking_grid(images[:2], [r, r], images, titles=["a", "b"]).axes)
        14
    """
    rankings = [retrieved] if isinstance(retrieved, Retrieved) else list(retrieved)
    if not rankings:
        raise ValueError("`retrieved` is empty: pass at least one `Retrieved` ranking.")
    num_queries = int(query_images.shape[0])
    if any(r.indices.shape[0] != num_queries for r in rankings):
        raise ValueError(
            f"Every ranking must have one row per query ({num_queries}), got {[r.indices.shape[0] for r in rankings]}."
        )
    if titles is not None and len(titles) != len(rankings):
        raise ValueError(f"`titles` needs one title per ranking ({len(rankings)}), got {len(titles)}.")
    load = ref_images if callable(ref_images) else (lambda i: ref_images[i])
    queries = to_display(query_images, mean, std)
    widths = [1.0]
    for r in rankings:
        widths += [0.25] + [1.0] * r.indices.shape[1]
    width, height = cell_inches * sum(widths) + 0.3, cell_inches * num_queries * 1.2 + 0.8
    fig = Figure(figsize=(width, height))
    grid = fig.add_gridspec(
        num_queries, len(widths), width_ratios=widths, wspace=0.08, hspace=0.3,
        left=0.15 / width, right=1 - 0.15 / width, top=1 - 0.3 / height, bottom=0.55 / height,
    )
    for q in range(num_queries):
        ax = fig.add_subplot(grid[q, 0])
        _frame(ax, queries[q], _QUERY, 3.0)
        if q == 0:
            ax.set_title("query", fontsize=9)
    column = 1
    for p, r in enumerate(rankings):
        images = to_display(load(r.indices.reshape(-1).cpu()), mean, std)
        k = r.indices.shape[1]
        for q in range(num_queries):
            for j in range(k):
                ax = fig.add_subplot(grid[q, column + 1 + j])
                _frame(ax, images[q * k + j], level_colour(int(r.levels[q, j]), r.num_levels), 4.0)
                if show_scores:
                    ax.set_xlabel(f"{float(r.scores[q, j]):.2f}", fontsize=7, labelpad=1)
                if q == 0 and j == 0 and titles is not None:
                    ax.set_title(titles[p], fontsize=10, loc="left")
        column += 1 + k
    legend = [Patch(edgecolor=_GREEN, facecolor="none", lw=3, label="same class")]
    if any(r.num_levels > 1 for r in rankings):
        legend.append(Patch(edgecolor=_ORANGE, facecolor="none", lw=3, label="same coarse class"))
    legend.append(Patch(edgecolor=_RED, facecolor="none", lw=3, label="unrelated"))
    if any(r.num_levels > 0 for r in rankings):  # unlabelled rankings (num_levels 0) have nothing to explain
        fig.legend(handles=legend, loc="lower center", ncol=len(legend), frameon=False, fontsize=9)
    return fig
