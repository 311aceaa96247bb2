"""A trained network out of its run: ``model.net`` of the run's config, the weights of its checkpoint, and its card.

The **card** is a JSON-able dict that travels with every exported model and search index, so that a model can be used
without ranklit's config machinery and an index is never searched with another model's descriptors::

    {"format": "ranklit-model", "version": 1,
     "input": {"channels": 3, "height": 224, "width": 224, "layout": "NCHW", "dtype": "float32", "name": "images"},
     "preprocessing": {"resize_size": 256, "crop_size": 224, "interpolation": "bilinear",
                       "mean": [...], "std": [...], "scale": "RGB divided by 255, then (x - mean) / std",
                       "recipe": [every step, in words], "code": "ranklit_preprocess.py ..."},
     "output": {"name": "embeddings", "embedding_dim": 512, "l2_normalised": true},
     "model_sha256": "...", "checkpoint": "/abs/path.ckpt", "versions": {"ranklit": ..., "torch": ...},
     "config": {...}}

``preprocessing`` is the complete recipe from an image file to the network's input (decoding, EXIF orientation,
transparency over white, resize, crop, normalisation: :data:`ranklit.data.images.preprocess.RECIPE`), which the file
``ranklit_preprocess.py`` that ``ranklit export`` writes beside the model computes with numpy and Pillow only.
``model_sha256`` hashes the network's weights (names, shapes, values): two cards describe the same model iff their
hashes agree. ``config`` is the YAML config the network was built from, as read.
"""

from __future__ import annotations

import hashlib
import inspect
import re
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import torch
import yaml
from torch import nn

from ranklit._checkpoint import load_checkpoint, offline_rebuild
from ranklit.errors import UserError

__all__ = ["CARD_FORMAT", "PREPROCESS_FILE", "LoadedModel", "load_model", "weights_sha256"]

CARD_FORMAT = "ranklit-model"
PREPROCESS_FILE = "ranklit_preprocess.py"
"""What ``ranklit export`` names its copy of :mod:`ranklit.data.images.preprocess`, beside the model."""


def weights_sha256(net: nn.Module) -> str:
    """SHA-256 of the network's state (every tensor's name, dtype, shape and bytes, in name order).

    Example:
        >>> a, b = nn.Linear(2, 2), nn.Linear(2, 2)
        >>> weights_sha256(a) == weights_sha256(a), weights_sha256(a) == weights_sha256(b)
        (True, False)
    """
    digest = hashlib.sha256()
    for name, value in sorted(net.state_dict().items()):
        tensor = value.detach().cpu().contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def _ranklit_version() -> str:
    try:
        return version("ranklit")  # what `ranklit.__version__` reads (the deploy layer does not import `ranklit`)
    except PackageNotFoundError:
        return "0+unknown"


@dataclass
class LoadedModel:
    """A network in eval mode and its card (module docstring)."""

    net: nn.Module
    card: dict[str, Any]

    def transform(self) -> Any:
        """The evaluation transform of the card: resize the shorter side, centre-crop, normalise."""
        from ranklit.data.images.transforms import test_transform

        p = self.card["preprocessing"]
        style = {"mean": tuple(p["mean"]), "std": tuple(p["std"]), "interpolation": p["interpolation"]}
        return test_transform(p["resize_size"], p["crop_size"], **style)


def _read_config(config: Path) -> dict[str, Any]:
    if not config.is_file():
        raise UserError(f"config file {config} not found: give the `config.yaml` of the run that wrote the checkpoint.")
    tree = yaml.safe_load(config.read_text())
    net = (tree.get("model") or {}).get("net") if isinstance(tree, dict) else None
    if not isinstance(net, dict) or "class_path" not in net:
        raise UserError(
            f"{config} has no `model.net` with a `class_path`: give the `config.yaml` of the run that wrote the "
            "checkpoint (its run folder holds it)."
        )
    return tree


def _build_net(net_config: dict[str, Any], config: Path) -> nn.Module:
    """``model.net`` of a config, with ``pretrained: false, weights: null``: its weights come from a checkpoint, so
    nothing is downloaded nor read from the hub's cache or the run's initial weights file
    (:func:`ranklit._checkpoint.offline_rebuild`)."""
    from jsonargparse import ArgumentParser

    init_args = dict(net_config.get("init_args") or {})
    if offline_rebuild(init_args):
        net_config = {**net_config, "init_args": init_args}
    parser = ArgumentParser(exit_on_error=False)
    parser.add_subclass_arguments(nn.Module, "net")
    try:
        return parser.instantiate(parser.parse_object({"net": net_config})).net
    except Exception as error:  # jsonargparse's ArgumentError, or the class's own ValueError
        raise UserError(f"{config}: `model.net` cannot be built: {_build_reason(error)}") from error


def _build_reason(error: BaseException) -> str:
    """The reason jsonargparse buries in its union dump: the innermost exception's first line (the class's own
    message, an unknown option), after the innermost init argument the dump names."""
    inner = error
    while (inner.__cause__ or inner.__context__) is not None:
        inner = inner.__cause__ or inner.__context__  # type: ignore[assignment]
    keys = [key for key in re.findall(r'Parser key "([^"]+)"', str(error)) if key != "net"]
    reason = next((line.strip() for line in str(inner).splitlines() if line.strip()), type(inner).__name__)
    return f"`{keys[-1]}`: {reason}" if keys and keys[-1] not in reason else reason


def _load_weights(net: nn.Module, ckpt_path: Path, config: Path) -> dict[str, Any]:
    checkpoint = load_checkpoint(ckpt_path)  # weights only: a checkpoint naming code to run is refused
    state = checkpoint.get("state_dict") if isinstance(checkpoint, dict) else None
    if not isinstance(state, dict):
        raise UserError(f"{ckpt_path} is not a Lightning checkpoint of ranklit (no `state_dict`).")
    weights = {name.removeprefix("net."): value for name, value in state.items() if name.startswith("net.")}
    try:
        net.load_state_dict(weights, strict=True)
    except RuntimeError as error:
        problem = " ".join(line.strip() for line in str(error).splitlines()[1:3])
        raise UserError(
            f"{ckpt_path}: its network does not fit `model.net` of {config} ({problem}). Give the `config.yaml` of "
            "the run that wrote the checkpoint."
        ) from None
    return checkpoint


def load_model(config: str | Path, ckpt_path: str | Path) -> LoadedModel:
    """Build ``model.net`` of ``config`` (a run's ``config.yaml``), load the network's weights of ``ckpt_path``.

    The preprocessing is the one the checkpoint was trained with (``data.resize_size``, ``crop_size``, ``mean``,
    ``std``: recorded in the checkpoint, :mod:`ranklit.data._recorded`); for an older checkpoint that records none, the
    config's (:class:`ranklit.data.RetrievalDataModule`'s defaults where absent). The network is put in eval mode.

    Raises:
        UserError: a missing file, a config without ``model.net``, or a checkpoint whose network does not fit it.
    """
    from ranklit.data import RetrievalDataModule, recorded_preprocessing
    from ranklit.data.images.preprocess import RECIPE

    config, ckpt_path = Path(config), Path(ckpt_path)
    tree = _read_config(config)
    net = _build_net(tree["model"]["net"], config)
    checkpoint = _load_weights(net, ckpt_path, config)
    net.eval()
    defaults = {name: p.default for name, p in inspect.signature(RetrievalDataModule).parameters.items()}
    data = {**defaults, **(tree.get("data") or {})}
    recorded = recorded_preprocessing(checkpoint, ckpt_path)
    data.update(recorded[0] if recorded is not None else {})
    size = int(data["crop_size"])
    with torch.no_grad():
        probe = net(torch.zeros(2, 3, size, size))
    normalised = bool(torch.allclose(probe.norm(dim=1), torch.ones(2), atol=1e-4)) and bool(
        getattr(net, "normalize", True)
    )
    card = {
        "format": CARD_FORMAT,
        "version": 1,
        "input": {"name": "images", "channels": 3, "height": size, "width": size, "layout": "NCHW", "dtype": "float32"},
        "preprocessing": {
            "resize_size": int(data["resize_size"]),
            "crop_size": size,
            "interpolation": "bilinear",
            "mean": [float(v) for v in data["mean"]],
            "std": [float(v) for v in data["std"]],
            "scale": "RGB divided by 255, then (x - mean) / std per channel",
            "recipe": RECIPE,
            "code": f"{PREPROCESS_FILE} (numpy + Pillow): preprocess(image_file, card['preprocessing'])",
        },
        "output": {"name": "embeddings", "embedding_dim": int(probe.shape[1]), "l2_normalised": normalised},
        "model_sha256": weights_sha256(net),
        "checkpoint": str(ckpt_path.resolve()),
        "versions": {"ranklit": _ranklit_version(), "torch": torch.__version__},
        "config": tree,
    }
    return LoadedModel(net, card)
