"""Ranking losses as ``nn.Module`` (no Lightning import)."""

from ranklit.losses._binned_ap import FastAPLoss, SoftBinAPLoss
from ranklit.losses._blackbox import BlackBoxAPLoss
from ranklit.losses._calibration import CalibrationLoss
from ranklit.losses._cluster import ClusterLoss
from ranklit.losses._composite import ROADMAPLoss
from ranklit.losses._csl import CSLLoss
from ranklit.losses._hap import HAPLoss, HAPPIERLoss
from ranklit.losses._level_sum import LevelSumLoss
from ranklit.losses._pair import ContrastiveLoss, TripletLoss
from ranklit.losses._proxy import NormSoftmaxLoss, ProxyNCAPPLoss
from ranklit.losses._smooth_rank import SmoothAPLoss, SupAPLoss
from ranklit.losses.base import BinaryRetrievalLoss, EmbeddingLoss, RetrievalLoss

__all__ = [
    # base classes
    "EmbeddingLoss",
    "RetrievalLoss",
    "BinaryRetrievalLoss",
    # AP surrogates
    "SmoothAPLoss",
    "SupAPLoss",
    "CalibrationLoss",
    "ROADMAPLoss",
    "FastAPLoss",
    "SoftBinAPLoss",
    "BlackBoxAPLoss",
    # hierarchical
    "HAPLoss",
    "ClusterLoss",
    "HAPPIERLoss",
    "LevelSumLoss",
    "CSLLoss",
    # pair and proxy baselines
    "ContrastiveLoss",
    "TripletLoss",
    "NormSoftmaxLoss",
    "ProxyNCAPPLoss",
]
