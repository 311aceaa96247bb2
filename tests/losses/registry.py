"""Every loss of this family with constructor arguments for small tests (registry for the generic checks)."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from ranklit.losses import (
    BlackBoxAPLoss,
    CalibrationLoss,
    ClusterLoss,
    ContrastiveLoss,
    CSLLoss,
    FastAPLoss,
    HAPLoss,
    HAPPIERLoss,
    LevelSumLoss,
    NormSoftmaxLoss,
    ProxyNCAPPLoss,
    ROADMAPLoss,
    SmoothAPLoss,
    SoftBinAPLoss,
    SupAPLoss,
    TripletLoss,
)

NUM_CLASSES, DIM = 6, 8

REGISTRY: dict[str, Callable[[], nn.Module]] = {
    "SmoothAPLoss": SmoothAPLoss,
    "SupAPLoss": SupAPLoss,
    "CalibrationLoss": CalibrationLoss,
    "ROADMAPLoss": ROADMAPLoss,
    "FastAPLoss": FastAPLoss,
    "SoftBinAPLoss": SoftBinAPLoss,
    "SoftBinAPLoss_options": lambda: SoftBinAPLoss(tie_aware=True, class_balanced=True),
    "BlackBoxAPLoss": BlackBoxAPLoss,
    "ContrastiveLoss": ContrastiveLoss,
    "TripletLoss": TripletLoss,
    "TripletLoss_distance_weighted": lambda: TripletLoss(mining="distance_weighted"),
    "NormSoftmaxLoss": lambda: NormSoftmaxLoss(NUM_CLASSES, DIM),
    "ProxyNCAPPLoss": lambda: ProxyNCAPPLoss(NUM_CLASSES, DIM),
    "HAPLoss": HAPLoss,
    "HAPLoss_without_hrank": lambda: HAPLoss(with_hrank=False),
    "HAPPIERLoss": lambda: HAPPIERLoss(NUM_CLASSES, DIM),
    "ClusterLoss": lambda: ClusterLoss(NUM_CLASSES, DIM),
    "CSLLoss": lambda: CSLLoss(NUM_CLASSES, DIM, margins=(0.25, 0.35)),
    "LevelSumLoss": lambda: LevelSumLoss(SupAPLoss()),
}

PROXY_LOSSES = {"NormSoftmaxLoss", "ProxyNCAPPLoss", "HAPPIERLoss", "ClusterLoss", "CSLLoss"}
RANDOM_LOSSES = {"TripletLoss_distance_weighted", "BlackBoxAPLoss"}  # random in training mode
AP_LOSSES = {"SmoothAPLoss", "SupAPLoss", "FastAPLoss", "SoftBinAPLoss", "SoftBinAPLoss_options", "BlackBoxAPLoss"}
