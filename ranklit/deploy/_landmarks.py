"""The landmark pipeline's pieces that ``ranklit.deploy`` (and the deploy commands, tests and benchmark) use, imported
in this one place: descriptor shards, whitening, α-QE and DBA live in ``ranklit.functional`` today and move to the
``ranklit.landmarks`` package (issue 29); when they do, only these import lines change."""

from ranklit.landmarks._whitening import learn_whitening
from ranklit.landmarks.descriptors import Descriptors, DescriptorShards, DescriptorWriter, TensorDescriptors
from ranklit.landmarks.postprocess import (
    AlphaQueryExpansion,
    DatabaseAugmentation,
    LearntWhitening,
    PostProcessStep,
    apply_postprocess,
)

__all__ = [
    "AlphaQueryExpansion",
    "DatabaseAugmentation",
    "DescriptorShards",
    "DescriptorWriter",
    "Descriptors",
    "LearntWhitening",
    "PostProcessStep",
    "TensorDescriptors",
    "apply_postprocess",
    "learn_whitening",
]
