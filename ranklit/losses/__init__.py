"""Ranking losses as ``nn.Module`` (no Lightning import).

Each loss is declared once, by ``@register_loss`` next to its class (:mod:`ranklit.losses._registry`): that
declaration fills ``__all__``, :func:`list_losses` and :func:`create_loss`, the registry-driven tests and the docs'
losses index. Every module of this package is imported here, so a loss in a new module registers itself; the static
imports below keep the names visible to IDEs and type checkers.
"""

from ranklit.losses._registry import create_loss, import_submodules, list_losses, loss_entry, register_loss
from ranklit.losses.base import BinaryRetrievalLoss, EmbeddingLoss, RetrievalLoss
from ranklit.losses.binned_ap import FastAPLoss as FastAPLoss
from ranklit.losses.binned_ap import SoftBinAPLoss as SoftBinAPLoss
from ranklit.losses.blackbox import BlackBoxAPLoss as BlackBoxAPLoss
from ranklit.losses.calibration import CalibrationLoss as CalibrationLoss
from ranklit.losses.cluster import ClusterLoss as ClusterLoss
from ranklit.losses.composite import ROADMAPLoss as ROADMAPLoss
from ranklit.losses.csl import CSLLoss as CSLLoss
from ranklit.losses.hap import HAPLoss as HAPLoss
from ranklit.losses.hap import HAPPIERLoss as HAPPIERLoss
from ranklit.losses.level_sum import LevelSumLoss as LevelSumLoss
from ranklit.losses.pair import ContrastiveLoss as ContrastiveLoss
from ranklit.losses.pair import TripletLoss as TripletLoss
from ranklit.losses.proxy import NormSoftmaxLoss as NormSoftmaxLoss
from ranklit.losses.proxy import ProxyNCAPPLoss as ProxyNCAPPLoss
from ranklit.losses.smooth_rank import SmoothAPLoss as SmoothAPLoss
from ranklit.losses.smooth_rank import SupAPLoss as SupAPLoss

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
