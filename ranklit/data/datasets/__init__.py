"""Readers of the benchmark datasets in their official on-disk layouts, and the built-in synthetic dataset."""

from ranklit.data.datasets.base import ImageRetrievalDataset, RetrievalDataset
from ranklit.data.datasets.csv_dataset import CSVDataset
from ranklit.data.datasets.cub import CUB200
from ranklit.data.datasets.dyml import DyML
from ranklit.data.datasets.folder import ClassFolderDataset
from ranklit.data.datasets.image_files import ImageFiles
from ranklit.data.datasets.inaturalist import INaturalist2018
from ranklit.data.datasets.inshop import InShop
from ranklit.data.datasets.revisited import RevisitedLandmarks
from ranklit.data.datasets.revisited_test import RevisitedTestSet
from ranklit.data.datasets.sop import StanfordOnlineProducts
from ranklit.data.datasets.synthetic import SyntheticHierarchy
from ranklit.data.datasets.vehicleid import VehicleID

__all__ = [
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
    "RevisitedLandmarks",
    "RevisitedTestSet",
    "StanfordOnlineProducts",
    "VehicleID",
]
