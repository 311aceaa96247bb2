"""The landmark-retrieval test-time pipeline: descriptors on disk, whitening, α-QE / DBA, the Revisited Oxford and
Paris datasets, their mAP and mP@k under the easy / medium / hard protocols.

- :mod:`ranklit.landmarks.descriptors` — descriptor sets as tensors or ``.npy`` shards on disk, streamed in chunks.
- :mod:`ranklit.landmarks.neighbours` — scores and top-k of queries against a descriptor set, chunk by chunk.
- :mod:`ranklit.landmarks._whitening`, :mod:`ranklit.landmarks.postprocess` — learnt whitening, α-QE, DBA.
- :mod:`ranklit.landmarks._protocols`, :mod:`ranklit.landmarks._revisited_map`,
  :mod:`ranklit.landmarks._revisited_metrics` — the protocols, the metric function and its torchmetrics class.
- :mod:`ranklit.landmarks._datasets`, :mod:`ranklit.landmarks._evaluation_set`, :mod:`ranklit.landmarks.ground_truth` —
  the Revisited readers (these need the ``train`` extra: Pillow, torchvision; imported on first use).

The pipeline is pure torch + numpy except the readers, so the metric and the post-processing work with the core
install; :mod:`ranklit.functional` itself stays free of files on disk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ranklit.landmarks._protocols import PROTOCOLS
from ranklit.landmarks._revisited_map import revisited_map
from ranklit.landmarks._revisited_metrics import RevisitedMetrics
from ranklit.landmarks._whitening import Whitening, learn_whitening
from ranklit.landmarks.descriptors import DescriptorShards, DescriptorWriter, as_descriptors, open_descriptors
from ranklit.landmarks.neighbours import query_scores, top_k
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
    "DescriptorShards",
    "DescriptorWriter",
    "LearntWhitening",
    "PostProcessStep",
    "RevisitedLandmarks",
    "RevisitedMetrics",
    "RevisitedTestSet",
    "Whitening",
    "alpha_query_expansion",
    "apply_postprocess",
    "as_descriptors",
    "learn_whitening",
    "open_descriptors",
    "query_scores",
    "revisited_map",
    "top_k",
]

_READERS = {
    "RevisitedLandmarks": "ranklit.landmarks._datasets",
    "RevisitedTestSet": "ranklit.landmarks._evaluation_set",
}


def __getattr__(name: str) -> Any:
    """The Revisited readers, imported on first use (they need Pillow and torchvision, the ``train`` extra)."""
    if name in _READERS:
        import importlib

        return getattr(importlib.import_module(_READERS[name]), name)
    raise AttributeError(f"module 'ranklit.landmarks' has no attribute {name!r}")
