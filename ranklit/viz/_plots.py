"""Figures of the papers: the surrogate steps (ROADMAP Fig. 3), the embedding map (HAPPIER Fig. 5), the
decomposability gap against the batch size (ROADMAP Fig. 5) and the training curves of a Lightning ``CSVLogger``."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import cast

import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from torch import Tensor

from ranklit.functional.ranking import heaviside, linear_lower_step, sigmoid_step, supap_upper_step

__all__ = ["step_functions_figure", "class_means", "embedding_map", "gap_figure", "metric_curves"]


def step_functions_figure(
    x_range: tuple[float, float] = (-0.1, 0.1),
    *,
    tau: float = 0.01,
    rho: float = 100.0,
    delta: float = 0.05,
    leak: float = 10.0,
    beta: float = 25.0,
    gamma: float = 0.5,
) -> Figure:
    """The Heaviside step ``H`` and its surrogates, with the defaults of [spec §2][spec-losses] (ROADMAP Fig. 3,
    HAPPIER §3.2).

    Left: the sigmoid ``σ(x/τ)`` of Smooth-AP and ROADMAP's upper bound ``H⁻`` (used on negatives, ``H⁻ ≥ H``).
    Right: HAPPIER's lower bound ``H_lb`` (used in the H-rank, ``H_lb ≤ H``). ``x = s_j − s_k`` is how far item
    ``j`` scores above the ranked item ``k``.

    Example:
        >>> len(step_functions_figure().axes)
        2
    """
    x = torch.linspace(x_range[0], x_range[1], 2001, dtype=torch.float64)
    fig = Figure(figsize=(10, 3.8), layout="constrained")
    left, right = fig.subplots(1, 2)
    curves = [
        (left, supap_upper_step(x, tau, rho, delta), f"H⁻ (SupAP upper bound, ρ={rho:g}, δ={delta:g})", "#d62728"),
        (left, sigmoid_step(x, tau), f"sigmoid σ(x/τ), τ={tau:g}", "#1f77b4"),
        (right, linear_lower_step(x, leak, beta, gamma), f"H_lb (H-rank lower bound, β={beta:g}, γ={gamma:g})",
         "#2ca02c"),
    ]
    for ax in (left, right):
        ax.plot(x, heaviside(x), color="black", lw=2.5, label="Heaviside H", drawstyle="steps-post")
    for ax, y, label, colour in curves:
        ax.plot(x, y, color=colour, lw=2, label=label)
    left.set_title("rank of negatives: SupAP's H⁻ ≥ H")
    right.set_title("H-rank (HAPPIER): H_lb ≤ H")
    for ax in (left, right):
        ax.axvline(0.0, color="grey", lw=0.5)
        ax.set_xlabel("x = s_j − s_k")
        ax.set_ylim(-1.2, 2.7)
        ax.legend(fontsize=8, loc="upper left")
    return fig


def class_means(embeddings: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """Mean embedding of each fine class (column 0), L2-normalised, with the class's label row.

    Returns:
        ``(means [C, D], class_labels [C, L])`` with the classes in increasing order of their fine label.

    Example:
        >>> embeddings = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
        >>> means, rows = class_means(embeddings, torch.tensor([[0, 5], [1, 5], [1, 5]]))
        >>> means.tolist(), rows.tolist()
        ([[1.0, 0.0], [0.0, 1.0]], [[0, 5], [1, 5]])
    """
    labels = labels[:, None] if labels.ndim == 1 else labels
    if embeddings.ndim != 2 or labels.shape[0] != embeddings.shape[0]:
        raise ValueError(
            f"`embeddings` [N, D] and `labels` [N] or [N, L] must have the same N, got {tuple(embeddings.shape)} "
            f"and {tuple(labels.shape)}."
        )
    classes, inverse = torch.unique(labels[:, 0], return_inverse=True)
    sums = torch.zeros(len(classes), embeddings.shape[1], dtype=torch.float64).index_add_(
        0, inverse, embeddings.detach().double().cpu()
    )
    first = torch.full((len(classes),), labels.shape[0])
    first = first.scatter_reduce_(0, inverse, torch.arange(labels.shape[0]), "amin")
    return torch.nn.functional.normalize(sums, dim=1).to(embeddings.dtype), labels[first]


def embedding_map(
    points: Tensor | np.ndarray,
    groups: Tensor | np.ndarray,
    *,
    names: Sequence[str] | None = None,
    title: str | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Scatter of 2-D points (e.g. t-SNE of :func:`class_means`) coloured by group (coarse label): HAPPIER Fig. 5.

    Args:
        points: ``[C, 2]`` coordinates.
        groups: ``[C]`` integer group of each point (e.g. the last label column).
        names: display name of group ``g`` at position ``g``.
        title: axes title.
        ax: draw into these axes (e.g. one panel of a side-by-side); default a new figure.

    Example:
        >>> fig = embedding_map(np.zeros((3, 2)), np.array([0, 1, 1]), names=["a", "b"])
        >>> len(fig.axes[0].collections)
        2
    """
    xy, g = np.asarray(points, dtype=float), np.asarray(groups).astype(int)
    if xy.ndim != 2 or xy.shape[1] != 2 or g.shape != (xy.shape[0],):
        raise ValueError(f"`points` must be [C, 2] and `groups` [C], got {xy.shape} and {g.shape}.")
    if ax is None:
        ax = Figure(figsize=(6.5, 5), layout="constrained").subplots()
    cmap = colormaps["tab10" if g.max(initial=0) < 10 else "tab20"]
    for group in np.unique(g):
        label = names[group] if names is not None else f"group {group}"
        x, y = xy[g == group].T
        ax.scatter(x, y, s=40, color=cmap(group % cmap.N), label=label, edgecolors="white", linewidths=0.5)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), markerscale=0.8, frameon=False)
    if title:
        ax.set_title(title)
    return cast(Figure, ax.figure)  # a SubFigure when `ax` lives in one


def gap_figure(batch_sizes: Sequence[int], gaps: Mapping[str, Sequence[float]], *, metric: str = "AP") -> Figure:
    """Decomposability gap against the batch size, one line per training setting (ROADMAP Fig. 5).

    The gap is ``mean over batches of the batch metric − the metric over the whole set``: how much a metric computed
    on mini-batches overstates the one the model is evaluated on.

    Example:
        >>> fig = gap_figure([8, 16], {"SupAP": [0.3, 0.2], "ROADMAP": [0.2, 0.1]})
        >>> [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        ['SupAP', 'ROADMAP']
    """
    fig = Figure(figsize=(5.5, 4), layout="constrained")
    ax = fig.subplots()
    for name, values in gaps.items():
        if len(values) != len(batch_sizes):
            raise ValueError(f"`gaps[{name!r}]` has {len(values)} values for {len(batch_sizes)} batch sizes.")
        ax.plot(batch_sizes, values, marker="o", lw=2, label=name)
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(batch_sizes), [str(b) for b in batch_sizes])
    ax.axhline(0.0, color="grey", lw=0.5)
    ax.set_xlabel("batch size")
    ax.set_ylabel(f"decomposability gap (batch {metric} − full-set {metric})")
    ax.legend()
    return fig


def metric_curves(metrics_csv: str | Path, keys: Sequence[str], *, x: str = "epoch") -> Figure:
    """Plot columns of the ``metrics.csv`` a Lightning ``CSVLogger`` writes (one panel per key) against ``x``.

    Rows where a key is empty (logged at other steps) are skipped. Raises ``ValueError`` naming the available
    columns when a key is missing.
    """
    with open(metrics_csv, newline="") as handle:
        rows = list(csv.DictReader(handle))
    columns = list(rows[0]) if rows else []
    missing = [k for k in (*keys, x) if k not in columns]
    if missing:
        raise ValueError(f"{metrics_csv} has no column {missing}; available columns: {columns}.")
    fig = Figure(figsize=(4.2 * len(keys), 3.4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(keys)))
    for ax, key in zip(axes, keys, strict=True):
        points = [(float(r[x]), float(r[key])) for r in rows if r[key] != "" and r[x] != ""]
        if points:
            ax.plot(*zip(*points, strict=True), marker="o")
        ax.set_xlabel(x)
        ax.set_title(key)
    return fig
