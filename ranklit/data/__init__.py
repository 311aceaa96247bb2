"""Datasets, samplers, transforms and the ``RetrievalDataModule``.

``RetrievalDataModule`` is imported lazily: ``import ranklit.data`` does not import Lightning.
"""

from typing import TYPE_CHECKING, Any

from ranklit.data._category_sampler import CategorySampler
from ranklit.data._samplers import HierarchicalSampler, PKSampler
from ranklit.data._uniform_sampler import UniformBatchSampler
from ranklit.data.datasets import *  # noqa: F403  (the dataset classes)
from ranklit.data.datasets import __all__ as _dataset_names
from ranklit.data.sampler_base import EpochBatchSampler, SeededIndex, batches_per_rank

if TYPE_CHECKING:
    from ranklit.data._datamodule import RetrievalDataModule

__all__ = [  # RetrievalDataModule is lazy: see __getattr__
    "CategorySampler",
    "EpochBatchSampler",
    "HierarchicalSampler",
    "PKSampler",
    "RetrievalDataModule",
    "SeededIndex",
    "UniformBatchSampler",
    "batches_per_rank",
    *_dataset_names,
]


def __getattr__(name: str) -> Any:
    if name == "RetrievalDataModule":
        from ranklit.data._datamodule import RetrievalDataModule

        return RetrievalDataModule
    raise AttributeError(f"module 'ranklit.data' has no attribute {name!r}")
