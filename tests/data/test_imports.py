"""`ranklit.data` (datasets, samplers, transforms) imports without Lightning; only the data module needs it."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.slow  # a fresh interpreter importing torch and torchvision
def test_data_imports_without_lightning() -> None:
    code = (
        "import sys, ranklit.data, ranklit.data.transforms, ranklit.data.samplers; "
        "from ranklit.data import CUB200, PKSampler, HierarchicalSampler, CSVDataset, RevisitedLandmarks; "
        "assert 'lightning' not in sys.modules and 'pytorch_lightning' not in sys.modules, 'lightning imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
