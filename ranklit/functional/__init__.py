"""Pure-torch ranking machinery, losses and metrics (no Lightning).

Public modules are the losses' and metrics' math and the extension points a contributor builds on: ``inputs.py``
(``RetrievalInputs``, ``prepare_inputs``), ``loss_utils.py``, ``ranking.py`` (``map_query_chunks``),
``reducers.py`` (``Reducer``: per-query terms to a loss), ``binary_metrics.py`` (the one table where a binary metric is
declared), ``ties.py`` (``TiedPositives``, what a
declared metric receives) and ``sample_ids.py`` (shared by the cross-batch memory and the decomposability gap). The
machinery of ``retrieval_metrics`` is internal, its modules start with ``_``: ``_counting``, ``_positive_ranks``,
``_symmetric_ranks``, ``_sharding``, ``_query_values``, ``_metric_options``; so is the Triton engine of the smooth-rank
losses (``_rank_engine``, ``_rank_sums``, ``_rank_sum_kernels``), whose choice :func:`smooth_rank_engine` tells.
"""

from ranklit._moved import moved_getattr
from ranklit.functional._binned_ap import fastap_loss, softbin_ap_loss
from ranklit.functional._blackbox import blackbox_ap_loss
from ranklit.functional._hap import HAPOptions, hap_loss, hap_surrogate
from ranklit.functional._metrics import retrieval_metrics
from ranklit.functional._pair_losses import calibration_loss, contrastive_loss
from ranklit.functional._proxies import cluster_loss, csl_loss
from ranklit.functional._rank_engine import smooth_rank_engine
from ranklit.functional._smooth_rank import SupAPOptions, smooth_ap_loss, supap_loss
from ranklit.functional._triplet import triplet_loss
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
