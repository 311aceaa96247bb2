"""Ranking losses as ``nn.Module`` (no Lightning import)."""

from ranklit.losses.base import BinaryRetrievalLoss, LevelRetrievalLoss, RetrievalLoss
from ranklit.losses.calibration import CalibrationLoss
from ranklit.losses.composite import ROADMAPLoss
from ranklit.losses.smooth_ap import SmoothAPLoss, SupAPLoss
from ranklit.losses.fastap import FastAPLoss
from ranklit.losses.softbin import SoftBinAPLoss
