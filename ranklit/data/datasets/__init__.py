"""Readers of the benchmark datasets in their official on-disk layouts, and the built-in synthetic dataset.

Each class is imported on first use (:mod:`ranklit._lazy`): ``import ranklit.data.prepare`` (the ``ranklit data
prepare`` command) goes through this package's parent and must not import torch.
"""

from typing import TYPE_CHECKING

from ranklit._lazy import lazy_exports

if TYPE_CHECKING:
    from ranklit.data.datasets._csv_dataset import CSVDataset
    from ranklit.data.datasets._cub import CUB200
    from ranklit.data.datasets._dyml import DyML
    from ranklit.data.datasets._folder import BrokenLinksWarning, ClassFolderDataset
    from ranklit.data.datasets._image_files import ImageFiles
    from ranklit.data.datasets._inaturalist import INaturalist2018
    from ranklit.data.datasets._inshop import InShop
    from ranklit.data.datasets._sop import StanfordOnlineProducts
    from ranklit.data.datasets._synthetic import SyntheticHierarchy
    from ranklit.data.datasets._vehicleid import VehicleID
    from ranklit.data.datasets.base import ImageRetrievalDataset, RetrievalDataset

__all__ = [
    "BrokenLinksWarning",
    "SyntheticHierarchy",
    "CUB200",
    "CSVDataset",
    "ClassFolderDataset",
    "ImageFiles",
    "DyML",
    "INaturalist2018",
    "ImageRetrievalDataset",
    "RetrievalDataset",
    "InShop",
    "StanfordOnlineProducts",
    "VehicleID",
]
_MODULES = {  # name -> the module defining it
    "BrokenLinksWarning": "ranklit.data.datasets._folder",
    "SyntheticHierarchy": "ranklit.data.datasets._synthetic",
    "CUB200": "ranklit.data.datasets._cub",
    "CSVDataset": "ranklit.data.datasets._csv_dataset",
    "ClassFolderDataset": "ranklit.data.datasets._folder",
    "ImageFiles": "ranklit.data.datasets._image_files",
    "DyML": "ranklit.data.datasets._dyml",
    "INaturalist2018": "ranklit.data.datasets._inaturalist",
    "ImageRetrievalDataset": "ranklit.data.datasets.base",
    "RetrievalDataset": "ranklit.data.datasets.base",
    "InShop": "ranklit.data.datasets._inshop",
    "StanfordOnlineProducts": "ranklit.data.datasets._sop",
    "VehicleID": "ranklit.data.datasets._vehicleid",
}
__getattr__, __dir__ = lazy_exports(__name__, _MODULES)
