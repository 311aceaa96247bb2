"""Image conversions for plotting: tensors to displayable arrays, figures to RGB arrays (for loggers)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from torch import Tensor

from ranklit._checks import check_positive_int

__all__ = ["to_display", "figure_to_array", "image_grid"]


def to_display(
    images: Tensor | np.ndarray, mean: Sequence[float] | None = None, std: Sequence[float] | None = None
) -> np.ndarray:
    """Images ``[N, C, H, W]`` (``C`` = 1 or 3) to an array ``[N, H, W, 3]`` of floats in ``[0, 1]`` for ``imshow``.

    ``uint8`` images are divided by 255. Float images are un-normalised with ``mean`` and ``std`` (the values the
    transform used, e.g. ImageNet's); without them each image is rescaled to its own min-max range. Values are
    clipped to ``[0, 1]``.

    Example:
        >>> to_display(torch.full((1, 3, 2, 2), 255, dtype=torch.uint8)).max()
        np.float32(1.0)
        >>> to_display(torch.zeros(1, 3, 2, 2), mean=(0.5, 0.5, 0.5), std=(0.2, 0.2, 0.2))[0, 0, 0].tolist()
        [0.5, 0.5, 0.5]
    """
    x = torch.as_tensor(images).detach().cpu()
    if x.ndim != 4 or x.shape[1] not in (1, 3):
        raise ValueError(f"`images` must have shape [N, C, H, W] with C = 1 or 3, got {tuple(x.shape)}.")
    if (mean is None) != (std is None):
        raise ValueError("`mean` and `std` must be given together (the normalisation of the transform) or not at all.")
    if x.dtype == torch.uint8:
        x = x.float() / 255.0
    elif mean is not None and std is not None:
        x = x.float() * torch.tensor(std).view(1, -1, 1, 1) + torch.tensor(mean).view(1, -1, 1, 1)
    else:
        x = x.float()
        low = x.amin(dim=(1, 2, 3), keepdim=True)
        high = x.amax(dim=(1, 2, 3), keepdim=True)
        x = (x - low) / (high - low).clamp_min(1e-12)
    x = x.expand(-1, 3, -1, -1) if x.shape[1] == 1 else x
    return x.clamp(0.0, 1.0).permute(0, 2, 3, 1).numpy()


def figure_to_array(figure: Figure, dpi: float | None = None) -> np.ndarray:
    """Render a figure with the ``Agg`` canvas to an ``[H, W, 3]`` ``uint8`` array (what image loggers take).

    Example:
        >>> figure_to_array(Figure(figsize=(2, 1)), dpi=50).shape
        (50, 100, 3)
    """
    canvas = FigureCanvasAgg(figure)
    if dpi is not None:
        figure.set_dpi(dpi)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def image_grid(
    images: Tensor | np.ndarray,
    titles: Sequence[str] | None = None,
    *,
    ncols: int = 8,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
    cell_inches: float = 1.2,
) -> Figure:
    """Show images ``[N, C, H, W]`` in rows of ``ncols``, each with an optional title (e.g. its labels).

    Example:
        >>> len(image_grid(torch.zeros(5, 3, 4, 4, dtype=torch.uint8), [str(i) for i in range(5)], ncols=3).axes)
        5
    """
    shown = to_display(images, mean, std)
    if titles is not None and len(titles) != len(shown):
        raise ValueError(f"`titles` needs one title per image ({len(shown)}), got {len(titles)}.")
    check_positive_int("ncols", ncols)
    ncols = min(ncols, len(shown))
    nrows = -(-len(shown) // ncols)
    fig = Figure(figsize=(cell_inches * ncols, (cell_inches + 0.25) * nrows), layout="constrained")
    for i, image in enumerate(shown):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        ax.imshow(image, interpolation="nearest")
        ax.set_axis_off()
        if titles is not None:
            ax.set_title(titles[i], fontsize=8)
    return fig
