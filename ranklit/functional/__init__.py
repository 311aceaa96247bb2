"""Pure-torch ranking machinery, losses and metrics (no Lightning)."""

from ranklit.functional.binned_ap import fastap_loss, softbin_ap_loss
from ranklit.functional.blackbox import blackbox_ap_loss
from ranklit.functional.hap import HAPOptions, hap_loss, hap_surrogate
from ranklit.functional.landmarks import revisited_map
from ranklit.functional.metrics import retrieval_metrics
from ranklit.functional.pair_losses import calibration_loss, contrastive_loss
from ranklit.functional.proxies import cluster_loss, csl_loss
from ranklit.functional.smooth_rank import SupAPOptions, smooth_ap_loss, supap_loss
from ranklit.functional.triplet import triplet_loss
from ranklit.functional.whitening import learn_whitening

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
    "cluster_loss",
    "csl_loss",
    "triplet_loss",
    # metrics
    "retrieval_metrics",
    "revisited_map",
    # test-time descriptors
    "learn_whitening",
]
