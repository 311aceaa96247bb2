"""Shared pytest fixtures and settings: no network, wandb offline, deterministic seeds."""

import os

import pytest
import torch

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
if not torch.cuda.is_available():  # Triton's interpreter runs the loss kernels on CPU tensors (set before triton loads)
    os.environ.setdefault("TRITON_INTERPRET", "1")
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))  # pytest-xdist's workers share the cores
_THREADS = max(1, min(2, (os.cpu_count() or 1) // _WORKERS))
if _WORKERS > 1:  # the subprocesses (``ranklit fit``, DDP workers, notebooks' kernels) get the worker's share too
    os.environ.setdefault("OMP_NUM_THREADS", str(_THREADS))
torch.set_num_threads(_THREADS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the tests marked ``long`` unless ``RANKLIT_LONG_TESTS=1`` or ``-m`` names ``long``."""
    if os.environ.get("RANKLIT_LONG_TESTS") == "1" or "long" in (config.getoption("markexpr") or ""):
        return
    long = [item for item in items if item.get_closest_marker("long") is not None]
    if long:
        config.hook.pytest_deselected(items=long)
        items[:] = [item for item in items if item.get_closest_marker("long") is None]


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)
