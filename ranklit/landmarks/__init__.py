"""The landmark-retrieval test-time pipeline: whitening, α-QE / DBA, the Revisited Oxford and
Paris datasets, their mAP and mP@k under the easy / medium / hard protocols.

- :mod:`ranklit.landmarks._whitening`, :mod:`ranklit.landmarks.postprocess` — learnt whitening, α-QE, DBA.
- :mod:`ranklit.landmarks._protocols`, :mod:`ranklit.landmarks._revisited_map` — the protocols and the metric function
  (its torchmetrics class is :class:`ranklit.metrics.RevisitedMetrics`).
- :mod:`ranklit.landmarks._datasets`, :mod:`ranklit.landmarks._evaluation_set`, :mod:`ranklit.landmarks.ground_truth` —
  the Revisited readers (these need the ``train`` extra: Pillow, torchvision; imported on first use).

The pipeline is pure torch + numpy except the readers, so the metric and the post-processing work with the core
install; :mod:`ranklit.functional` itself stays free of files on disk. The descriptors on disk and the exact search
it runs over are :mod:`ranklit.index`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ranklit._lazy import lazy_exports
from ranklit.landmarks._protocols import PROTOCOLS
from ranklit.landmarks._revisited_map import revisited_map
from ranklit.landmarks._whitening import Whitening, learn_whitening
from ranklit.landmarks.postprocess import (
    AlphaQueryExpansion,
    DatabaseAugmentation,
    LearntWhitening,
    PostProcessStep,
    alpha_query_expansion,
    apply_postprocess,
)

if TYPE_CHECKING:
    from ranklit.landmarks._datasets import RevisitedLandmarks
    from ranklit.landmarks._evaluation_set import RevisitedTestSet

__all__ = [
    "PROTOCOLS",
    "AlphaQueryExpansion",
    "DatabaseAugmentation",
    "LearntWhitening",
    "PostProcessStep",
    "RevisitedLandmarks",
    "RevisitedTestSet",
    "Whitening",
    "alpha_query_expansion",
    "apply_postprocess",
    "learn_whitening",
    "revisited_map",
]

# the Revisited readers, imported on first use (they need Pillow and torchvision, the ``train`` extra)
__getattr__, __dir__ = lazy_exports(
    __name__,
    {"RevisitedLandmarks": "ranklit.landmarks._datasets", "RevisitedTestSet": "ranklit.landmarks._evaluation_set"},
)
