"""Datasets, samplers, transforms, the ``RetrievalDataModule`` and the preparation of the benchmark datasets
(:func:`prepare_dataset`, what ``ranklit data prepare`` runs).

``RetrievalDataModule`` is imported lazily: ``import ranklit.data`` does not import Lightning; nor does it import the
download machinery, until ``prepare_dataset`` is used.
"""

from typing import TYPE_CHECKING

from ranklit._lazy import lazy_exports
from ranklit.data._category_sampler import CategorySampler
from ranklit.data._samplers import HierarchicalSampler, PKSampler
from ranklit.data._uniform_sampler import UniformBatchSampler
from ranklit.data.datasets import *  # noqa: F403  (the dataset classes)
from ranklit.data.datasets import __all__ as _dataset_names
from ranklit.data.sampler_base import EpochBatchSampler, SeededIndex, batches_per_rank

if TYPE_CHECKING:
    from ranklit.data._crop_first import CropFirst
    from ranklit.data._datamodule import RetrievalDataModule
    from ranklit.data._device_decode import device_decoder
    from ranklit.data._prepare import DATASET_CATALOG, PreparedDataset, prepare_dataset
    from ranklit.data._recorded import PREPROCESSING, recorded_preprocessing

__all__ = [  # RetrievalDataModule and the dataset preparation are lazy: see __getattr__
    "DATASET_CATALOG",
    "PREPROCESSING",
    "CategorySampler",
    "CropFirst",
    "EpochBatchSampler",
    "HierarchicalSampler",
    "PKSampler",
    "PreparedDataset",
    "RetrievalDataModule",
    "SeededIndex",
    "UniformBatchSampler",
    "batches_per_rank",
    "device_decoder",
    "prepare_dataset",
    "recorded_preprocessing",
    *_dataset_names,
]


__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "RetrievalDataModule": "ranklit.data._datamodule",  # Lightning
        "DATASET_CATALOG": "ranklit.data._prepare",  # the download machinery, for `data prepare` alone
        "PreparedDataset": "ranklit.data._prepare",
        "prepare_dataset": "ranklit.data._prepare",
        "CropFirst": "ranklit.data._crop_first",  # the transforms that draw the crop before decoding
        "PREPROCESSING": "ranklit.data._recorded",  # the evaluation settings a checkpoint records
        "recorded_preprocessing": "ranklit.data._recorded",
        "device_decoder": "ranklit.data._device_decode",  # torchvision's decoders, for `ranklit check gpu`
    },
)
