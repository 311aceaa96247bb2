"""Pure-torch ranking machinery, losses and metrics (no Lightning), one sub-package a domain.

- :mod:`ranklit.functional.losses` — the functional losses; its public modules ``contract`` (a loss's checks and
  reduction) and ``hyperparameters`` are the extension points of a new loss;
- :mod:`ranklit.functional.metrics` — the exact metrics (:func:`retrieval_metrics`); its public modules ``binary``
  (the one table where a binary metric is declared) and ``engine`` (what :mod:`ranklit.metrics` builds on);
- ``_kernels`` — the Triton kernels and their launchers, whose choice for the smooth-rank losses
  :func:`smooth_rank_engine` tells;
- the shared basics: ``inputs`` (``RetrievalInputs``, ``prepare_inputs``), ``ranking`` (``map_query_chunks``),
  ``reducers`` (``Reducer``: per-query terms to a loss), ``ties`` (``TiedPositives``, what a declared metric
  receives), ``relevance``, ``floating_point`` (autocast off) and ``sample_ids`` (shared by the cross-batch memory and
  the decomposability gap).

The public names are this package's ``__all__``; the old module paths of 0.1.0 (``loss_utils``, ``binary_metrics``,
``metric_engine``, ``hyperparameters``, ``precision``) work until 0.3.0 with a ``FutureWarning``.
"""

from ranklit._moved import moved_getattr
from ranklit.functional._kernel_checks import KernelCheck, check_kernels
from ranklit.functional._kernels._guard import KernelError, KernelFallbackWarning
from ranklit.functional._kernels._rank_engine import smooth_rank_engine
from ranklit.functional.losses._binned_ap import fastap_loss, softbin_ap_loss
from ranklit.functional.losses._blackbox import blackbox_ap_loss
from ranklit.functional.losses._hap import HAPOptions, hap_loss, hap_surrogate
from ranklit.functional.losses._pair_losses import calibration_loss, contrastive_loss
from ranklit.functional.losses._proxies import cluster_loss, csl_loss
from ranklit.functional.losses._smooth_rank import SupAPOptions, smooth_ap_loss, supap_loss
from ranklit.functional.losses._triplet import triplet_loss
from ranklit.functional.metrics._retrieval import retrieval_metrics
from ranklit.functional.reducers import (
    ActiveReducer,
    ClassBalancedReducer,
    MeanReducer,
    NoReducer,
    Reducer,
    get_reducer,
)

__all__ = [
    # losses
    "smooth_ap_loss",
    "supap_loss",
    "SupAPOptions",
    "calibration_loss",
    "contrastive_loss",
    "fastap_loss",
    "softbin_ap_loss",
    "blackbox_ap_loss",
    "hap_loss",
    "hap_surrogate",
    "HAPOptions",
    "smooth_rank_engine",
    # the Triton kernels' self-checks and their fallback
    "check_kernels",
    "KernelCheck",
    "KernelError",
    "KernelFallbackWarning",
    "cluster_loss",
    "csl_loss",
    "triplet_loss",
    # reducers (per-query terms -> the loss)
    "Reducer",
    "MeanReducer",
    "ClassBalancedReducer",
    "ActiveReducer",
    "NoReducer",
    "get_reducer",
    # metrics
    "retrieval_metrics",
]

__getattr__ = moved_getattr(__name__)  # a name that moved says where (ranklit/_moved.py)
