"""Readers of the benchmark datasets in their official on-disk layouts, and the built-in synthetic dataset."""

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
