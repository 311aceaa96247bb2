"""Export a trained network to ONNX or TorchScript, with its card (:mod:`ranklit.deploy._model`) beside it.

The exported graph is the network exactly as ``RetrievalModule.net(x)`` computes it in eval mode (backbone, pooling,
head, L2 normalisation): input ``images`` ``[B, 3, H, W]`` float32, normalised as the card says, with a dynamic batch
axis ``B``; output ``embeddings`` ``[B, D]``. Multi-scale evaluation (``model.eval_scales``) is not part of the graph.

- **ONNX**: ``torch.onnx.export(..., dynamo=True)`` (torch.export, then onnxscript; ``pip install "ranklit[onnx]"``).
- **TorchScript**: ``torch.jit.trace`` (deprecated by torch in favour of torch.export, still loaded by
  ``torch.jit.load`` and by libtorch in C++; its deprecation warning is not shown).

After writing, the file is loaded back (onnxruntime for ONNX, when installed) and run on a batch of random images;
the largest absolute difference with the network is recorded in the card (``export.max_abs_diff``) and an export that
differs by more than ``1e-4`` is refused. Beside the model, ``ranklit_preprocess.py`` (a copy of
:mod:`ranklit.data.images.preprocess`: numpy and Pillow only) turns an image file into the network's input as ranklit
does; the preprocessing is not part of the graph (decoding, orientation and transparency are not tensor operations,
and an image's size sets the resize).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor, nn

from ranklit.data.images import preprocess as preprocess_module
from ranklit.deploy._model import PREPROCESS_FILE, LoadedModel
from ranklit.errors import UserError

__all__ = ["FORMATS", "card_path", "export_model"]

FORMATS = ("onnx", "torchscript")
SUFFIXES = {"onnx": (".onnx",), "torchscript": (".pt", ".pth", ".ts", ".jit", ".torchscript")}
"""The file name endings that say a format: an output named for the other format is refused (another ending is
free)."""
TOLERANCE = 1e-4
_TITLES = {"onnx": "an ONNX", "torchscript": "a TorchScript"}


def _check_suffix(output: Path, format: str) -> None:
    """Refuse an ``output`` whose ending names the other format (TorchScript written as ``m.onnx`` loads in no ONNX
    runtime, and nothing said so)."""
    named = next((kind for kind, endings in SUFFIXES.items() if output.suffix.lower() in endings), format)
    if named != format:
        rename = output.with_suffix(SUFFIXES[format][0]).name
        raise UserError(f"`--output` {output} is named as {_TITLES[named]} file but `--format` is {format}: write "
                        f"`--output {rename}`, or `--format {named}`.")


def card_path(model_file: str | Path) -> Path:
    """Where the card of an exported model lies: ``<model file>.json`` (``model.onnx`` → ``model.onnx.json``)."""
    return Path(f"{model_file}.json")


def _need(module: str, extra: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise UserError(f"this needs the package `{module}`: `pip install \"ranklit[{extra}]\"`.")


def _export_onnx(net: nn.Module, example: Tensor, output: Path) -> None:
    _need("onnxscript", "onnx")
    batch = torch.export.Dim("batch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.export's notes about the graph, none of them the user's doing
        torch.onnx.export(
            net,
            (example,),
            str(output),
            input_names=["images"],
            output_names=["embeddings"],
            dynamic_shapes=({0: batch},),
            dynamo=True,
            verbose=False,
            external_data=False,
        )


def _run_onnx(output: Path, images: Tensor) -> Tensor | None:
    if importlib.util.find_spec("onnxruntime") is None:
        return None
    import onnxruntime

    session = onnxruntime.InferenceSession(str(output), providers=["CPUExecutionProvider"])
    return torch.from_numpy(np.asarray(session.run(None, {"images": images.numpy()})[0]))


@contextmanager
def _quiet_jit() -> Iterator[None]:
    """torch >= 2.10 marks ``torch.jit.trace``/``save``/``load`` deprecated (FutureWarning); TracerWarnings are notes
    on the traced code (timm's shape asserts), not on the user's export."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`torch\.jit\.\w+` is deprecated", category=FutureWarning)
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        yield


def _export_torchscript(net: nn.Module, example: Tensor, output: Path) -> None:
    with _quiet_jit():
        torch.jit.save(torch.jit.trace(net, example), str(output))


def export_model(model: LoadedModel, output: str | Path, format: Literal["onnx", "torchscript"]) -> dict[str, Any]:
    """Write ``model.net`` to ``output`` in ``format`` and its card to :func:`card_path` ``(output)``.

    Args:
        model: the network and its card (:func:`ranklit.deploy.load_model`).
        output: the model file to write (its folder is created); an ending of the other format's
            (:data:`SUFFIXES`: ``.onnx`` for TorchScript) is refused.
        format: ``"onnx"`` or ``"torchscript"``.

    Returns:
        The card written (the model's card plus ``export``: format, file, batch axis, the verified difference);
        ``ranklit_preprocess.py`` is written beside ``output`` (module docstring).

    Cost: one trace of the network and one forward pass of 3 images through the export.
    """
    if format not in FORMATS:
        raise UserError(f"`--format` must be one of {', '.join(FORMATS)}, got {format!r}.")
    output = Path(output)
    _check_suffix(output, format)
    output.parent.mkdir(parents=True, exist_ok=True)
    size = model.card["input"]
    generator = torch.Generator().manual_seed(0)
    example = torch.randn(2, 3, size["height"], size["width"], generator=generator)
    probe = torch.randn(3, 3, size["height"], size["width"], generator=generator)  # another batch size than traced
    net = model.net.eval()
    with torch.no_grad():
        expected = net(probe)
        if format == "onnx":
            _export_onnx(net, example, output)
            got = _run_onnx(output, probe)
        else:
            _export_torchscript(net, example, output)
            with _quiet_jit():
                got = torch.jit.load(str(output))(probe)
    difference = None if got is None else float((got - expected).abs().max())
    if difference is not None and difference > TOLERANCE:
        output.unlink(missing_ok=True)
        raise RuntimeError(f"the {format} export differs from the network by {difference:.2e} (> {TOLERANCE}).")
    card = {
        **model.card,
        "export": {"format": format, "file": output.name, "dynamic_axes": {"images": [0], "embeddings": [0]},
                   "max_abs_diff": difference},
    }
    card_path(output).write_text(json.dumps(card, indent=2))
    shutil.copyfile(Path(preprocess_module.__file__), output.parent / PREPROCESS_FILE)  # the server's preprocessing
    return card
