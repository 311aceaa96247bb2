"""Datasets, samplers, transforms, the ``RetrievalDataModule`` and the preparation of the benchmark datasets
(:func:`prepare_dataset`, what ``ranklit data prepare`` runs).

Every name is imported on first use (:mod:`ranklit._lazy`): ``import ranklit.data`` imports neither torch nor
Lightning, so ``ranklit data prepare`` (``ranklit.data.prepare``, which imports this package first) answers without
them, and the download machinery waits for ``prepare_dataset``.
"""

from typing import TYPE_CHECKING

from ranklit._lazy import lazy_exports
from ranklit.data.datasets import __all__ as _dataset_names

if TYPE_CHECKING:
    from ranklit.data._datamodule import RetrievalDataModule
    from ranklit.data._recorded import PREPROCESSING, recorded_preprocessing
    from ranklit.data.datasets import (
        CUB200,
        BrokenLinksWarning,
        ClassFolderDataset,
        CSVDataset,
        DyML,
        ImageFiles,
        ImageRetrievalDataset,
        INaturalist2018,
        InShop,
        RetrievalDataset,
        StanfordOnlineProducts,
        SyntheticHierarchy,
        VehicleID,
    )
    from ranklit.data.images._crop_first import CropFirst
    from ranklit.data.images._device_decode import device_decoder
    from ranklit.data.prepare import DATASET_CATALOG, PreparedDataset, prepare_dataset
    from ranklit.data.samplers._category import CategorySampler
    from ranklit.data.samplers._pk import HierarchicalSampler, PKSampler
    from ranklit.data.samplers._uniform import UniformBatchSampler
    from ranklit.data.samplers.base import EpochBatchSampler, SeededIndex, batches_per_rank

__all__ = [  # all lazy: see __getattr__
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
    "BrokenLinksWarning",
    "CSVDataset",
    "CUB200",
    "ClassFolderDataset",
    "DyML",
    "INaturalist2018",
    "ImageFiles",
    "ImageRetrievalDataset",
    "InShop",
    "RetrievalDataset",
    "StanfordOnlineProducts",
    "SyntheticHierarchy",
    "VehicleID",
]


__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(_dataset_names, "ranklit.data.datasets"),
        "CategorySampler": "ranklit.data.samplers._category",
        "HierarchicalSampler": "ranklit.data.samplers._pk",
        "PKSampler": "ranklit.data.samplers._pk",
        "UniformBatchSampler": "ranklit.data.samplers._uniform",
        "EpochBatchSampler": "ranklit.data.samplers.base",
        "SeededIndex": "ranklit.data.samplers.base",
        "batches_per_rank": "ranklit.data.samplers.base",
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
