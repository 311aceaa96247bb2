"""Datasets, samplers, transforms, the ``RetrievalDataModule`` and the preparation of the benchmark datasets
(:func:`prepare_dataset`, what ``ranklit data prepare`` runs).

``RetrievalDataModule`` is imported lazily: ``import ranklit.data`` does not import Lightning; nor does it import the
download machinery, until ``prepare_dataset`` is used.
"""

from typing import TYPE_CHECKING

from ranklit._lazy import lazy_exports
from ranklit.data.datasets import *  # noqa: F403  (the dataset classes)
from ranklit.data.datasets import __all__ as _dataset_names
from ranklit.data.samplers._category import CategorySampler
from ranklit.data.samplers._pk import HierarchicalSampler, PKSampler
from ranklit.data.samplers._uniform import UniformBatchSampler
from ranklit.data.samplers.base import EpochBatchSampler, SeededIndex, batches_per_rank

if TYPE_CHECKING:
    from ranklit.data._datamodule import RetrievalDataModule
    from ranklit.data._recorded import PREPROCESSING, recorded_preprocessing
    from ranklit.data.images._crop_first import CropFirst
    from ranklit.data.images._device_decode import device_decoder
    from ranklit.data.prepare import DATASET_CATALOG, PreparedDataset, prepare_dataset

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
        "DATASET_CATALOG": "ranklit.data.prepare",  # the download machinery, for `data prepare` alone
        "PreparedDataset": "ranklit.data.prepare",
        "prepare_dataset": "ranklit.data.prepare",
        "CropFirst": "ranklit.data.images._crop_first",  # the transforms that draw the crop before decoding
        "PREPROCESSING": "ranklit.data._recorded",  # the evaluation settings a checkpoint records
        "recorded_preprocessing": "ranklit.data._recorded",
        "device_decoder": "ranklit.data.images._device_decode",  # torchvision's decoders, for `ranklit check gpu`
    },
)
