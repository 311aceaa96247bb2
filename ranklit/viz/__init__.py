"""Plotting helpers (matplotlib, ``Agg``-safe: figures are built without pyplot) for notebooks and loggers.

- :func:`retrieve` and :func:`ranking_grid`: queries and their top-k framed green / orange / red, several
  checkpoints side by side (ROADMAP Fig. 1, 6, 7; HAPPIER Fig. 1, 6);
- :func:`class_means` and :func:`embedding_map`: the class-mean embedding map coloured by coarse label (HAPPIER Fig. 5);
- :func:`step_functions_figure`: the Heaviside step and its surrogates (ROADMAP Fig. 3);
- :func:`gap_figure`: the decomposability gap against the batch size (ROADMAP Fig. 5);
- :func:`metric_curves`: training curves from a ``CSVLogger``'s ``metrics.csv``;
- :func:`image_grid`: a few images with their labels;
- :func:`to_display`, :func:`figure_to_array`: image conversions.

Every function returns a ``matplotlib.figure.Figure``; in Jupyter (``%matplotlib inline``) it displays as the cell's
value, elsewhere save it with ``fig.savefig(path)``.
"""

from ranklit.viz._images import figure_to_array, image_grid, to_display
from ranklit.viz._plots import class_means, embedding_map, gap_figure, metric_curves, step_functions_figure
from ranklit.viz._rankings import Retrieved, dataset_images, level_colour, ranking_grid, retrieve

__all__ = [
    "Retrieved",
    "class_means",
    "dataset_images",
    "embedding_map",
    "figure_to_array",
    "gap_figure",
    "image_grid",
    "level_colour",
    "metric_curves",
    "ranking_grid",
    "retrieve",
    "step_functions_figure",
    "to_display",
]
