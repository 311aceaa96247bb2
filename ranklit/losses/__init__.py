"""Ranking losses as ``nn.Module`` (no Lightning import)."""

from ranklit.losses.base import BinaryRetrievalLoss, EmbeddingLoss, RetrievalLoss
from ranklit.losses.binned_ap import FastAPLoss, SoftBinAPLoss
from ranklit.losses.blackbox import BlackBoxAPLoss
from ranklit.losses.calibration import CalibrationLoss
from ranklit.losses.cluster import ClusterLoss
from ranklit.losses.composite import ROADMAPLoss
from ranklit.losses.csl import CSLLoss
from ranklit.losses.hap import HAPLoss, HAPPIERLoss
from ranklit.losses.level_sum import LevelSumLoss
from ranklit.losses.pair import ContrastiveLoss, TripletLoss
from ranklit.losses.proxy import NormSoftmaxLoss, ProxyNCAPPLoss
from ranklit.losses.smooth_rank import SmoothAPLoss, SupAPLoss

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
