"""Float64 brute-force oracles written from docs/spec.md, independent of ranklit."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable

from torch import Tensor, nn


def raw_oracles() -> dict[str, Callable[[nn.Module, Tensor, Tensor], Tensor]]:
    """The ``RAW_ORACLES`` of every module of this package, merged: by registry test name (``tests/losses/
    registry.py``), ``oracle(loss module, unit-norm embeddings, [B, 2] labels)`` -> the expected loss."""
    merged: dict[str, Callable[[nn.Module, Tensor, Tensor], Tensor]] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for name, oracle in getattr(module, "RAW_ORACLES", {}).items():
            assert name not in merged, f"two oracles for {name}"
            merged[name] = oracle
    return merged
