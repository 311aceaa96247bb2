"""The evaluation preprocessing a checkpoint was trained with: image size and normalisation.

Every checkpoint written by a run of :class:`ranklit.data.RetrievalDataModule` records it (Lightning stores the
datamodule's ``state_dict()`` under its class name): ``{"preprocessing": {"resize_size", "crop_size", "mean",
"std"}}``. A checkpoint written before ranklit recorded it is read with the ``data`` section of its run's
``config.yaml`` when it lies in the run's ``checkpoints/`` folder (the datamodule's defaults for absent keys).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import yaml

__all__ = ["PREPROCESSING", "recorded_preprocessing"]

PREPROCESSING = ("resize_size", "crop_size", "mean", "std")
"""The ``data`` settings that prepare an evaluation image for the network."""


def _from_run_config(ckpt_path: Path) -> tuple[dict[str, Any], str] | None:
    from ranklit.data._datamodule import RetrievalDataModule

    folder = ckpt_path.resolve().parent
    config = folder.parent / "config.yaml"
    if folder.name != "checkpoints" or not config.is_file():
        return None
    try:
        tree = yaml.safe_load(config.read_text())
    except (OSError, yaml.YAMLError):
        return None
    data = (tree.get("data") if isinstance(tree, dict) else None) or {}
    defaults = {name: p.default for name, p in inspect.signature(RetrievalDataModule).parameters.items()}
    values = {name: data.get(name, defaults[name]) for name in PREPROCESSING}
    return {k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in values.items()}, str(config)


def recorded_preprocessing(checkpoint: Any, ckpt_path: str | Path) -> tuple[dict[str, Any], str] | None:
    """The preprocessing ``checkpoint`` (loaded from ``ckpt_path``) was trained with and where it was read (``"the
    checkpoint"`` or the run's ``config.yaml``); ``None`` when neither records it.

    Example:
        >>> record = {"preprocessing": {"resize_size": 36, "crop_size": 32, "mean": [0.5] * 3, "std": [0.2] * 3}}
        >>> found = recorded_preprocessing({"state_dict": {}, "RetrievalDataModule": record}, "elsewhere/x.ckpt")
        >>> found[0]["crop_size"], found[1]
        (32, 'the checkpoint')
        >>> recorded_preprocessing({"state_dict": {}}, "elsewhere/x.ckpt") is None
        True
    """
    for value in checkpoint.values() if isinstance(checkpoint, dict) else ():
        found = value.get("preprocessing") if isinstance(value, dict) else None
        if isinstance(found, dict) and set(PREPROCESSING) <= set(found):
            return {name: found[name] for name in PREPROCESSING}, "the checkpoint"
    return _from_run_config(Path(ckpt_path))
