"""Ranking losses as ``nn.Module`` (no Lightning import).

Each loss is declared once, by ``@register_loss`` next to its class (:mod:`ranklit.losses._registry`): that
declaration fills ``__all__``, :func:`list_losses` and :func:`create_loss`, the registry-driven tests and the docs'
losses index. Every module of this package is imported here, so a loss in a new module registers itself; the static
imports below keep the names visible to IDEs and type checkers.
"""

from ranklit.losses._binned_ap import FastAPLoss as FastAPLoss
from ranklit.losses._binned_ap import SoftBinAPLoss as SoftBinAPLoss
from ranklit.losses._blackbox import BlackBoxAPLoss as BlackBoxAPLoss
from ranklit.losses._calibration import CalibrationLoss as CalibrationLoss
from ranklit.losses._cluster import ClusterLoss as ClusterLoss
from ranklit.losses._composite import ROADMAPLoss as ROADMAPLoss
from ranklit.losses._csl import CSLLoss as CSLLoss
from ranklit.losses._hap import HAPLoss as HAPLoss
from ranklit.losses._hap import HAPPIERLoss as HAPPIERLoss
from ranklit.losses._level_sum import LevelSumLoss as LevelSumLoss
from ranklit.losses._pair import ContrastiveLoss as ContrastiveLoss
from ranklit.losses._pair import TripletLoss as TripletLoss
from ranklit.losses._proxy import NormSoftmaxLoss as NormSoftmaxLoss
from ranklit.losses._proxy import ProxyNCAPPLoss as ProxyNCAPPLoss
from ranklit.losses._registry import create_loss, import_submodules, list_losses, loss_entry, register_loss
from ranklit.losses._smooth_rank import SmoothAPLoss as SmoothAPLoss
from ranklit.losses._smooth_rank import SupAPLoss as SupAPLoss
from ranklit.losses.base import BinaryRetrievalLoss, EmbeddingLoss, RetrievalLoss

import_submodules(__name__, __path__)
globals().update({name: loss_entry(name).cls for name in list_losses()})

__all__ = [
    # base classes (extension points)
    "EmbeddingLoss",
    "RetrievalLoss",
    "BinaryRetrievalLoss",
    # the registry
    "register_loss",
    "list_losses",
    "create_loss",
    "loss_entry",
    # every registered loss
    *list_losses(),
]
