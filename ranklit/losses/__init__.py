"""Ranking losses as ``nn.Module`` (no Lightning import)."""

from ranklit.losses.base import BinaryRetrievalLoss, EmbeddingLoss, RetrievalLoss
from ranklit.losses.calibration import CalibrationLoss
from ranklit.losses.composite import ROADMAPLoss
from ranklit.losses.smooth_ap import SmoothAPLoss, SupAPLoss
from ranklit.losses.cluster import ClusterLoss
from ranklit.losses.csl import CSLLoss
from ranklit.losses.happier import HAPLoss, HAPPIERLoss
from ranklit.losses.level_sum import LevelSumLoss
from ranklit.losses.fastap import FastAPLoss
from ranklit.losses.softbin import SoftBinAPLoss
from ranklit.losses.blackbox import BlackBoxAPLoss
from ranklit.losses.pair import ContrastiveLoss, TripletLoss
from ranklit.losses.proxy import NormSoftmaxLoss, ProxyNCAPPLoss
