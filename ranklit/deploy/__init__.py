"""From a checkpoint to a search: export the network (ONNX, TorchScript), index a folder of images, search it.

- :func:`load_model` — ``model.net`` of a run's config with its checkpoint's weights, and the model's card.
- :func:`export_model` — ONNX / TorchScript file with a dynamic batch axis and its JSON card.
- :func:`build_index`, :func:`add_faiss`, :func:`evaluate_recall` — an index folder: descriptor shards, paths,
  weights, card; optionally a faiss structure and its recall@k against the exact search.
- :class:`Retriever` — search an index with images, image tensors or descriptors.

The command line: ``ranklit export``, ``ranklit index``, ``ranklit search`` (docs: the "Deploy" page). onnx,
onnxruntime and faiss are imported only by the functions that need them (extras ``onnx`` and ``faiss``).

Each name is imported on first use (PEP 562), so that ``ranklit index --help`` and ``ranklit search --help`` do not
import the landmark pipeline, torchmetrics and Lightning (issue 31: start-up time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ranklit._lazy import lazy_exports

if TYPE_CHECKING:
    from ranklit.deploy._export import card_path, export_model
    from ranklit.deploy._faiss_backend import BACKENDS
    from ranklit.deploy._faiss_index import add_faiss, evaluate_recall
    from ranklit.deploy._index import build_index, images_dataset, read_index_card
    from ranklit.deploy._model import LoadedModel, load_model
    from ranklit.deploy._retriever import Hit, Retriever

_LAZY = {name: f"ranklit.deploy.{module}" for module, names in {
    "_export": ("card_path", "export_model"), "_faiss_index": ("add_faiss", "evaluate_recall"),
    "_index": ("build_index", "images_dataset", "read_index_card"), "_faiss_backend": ("BACKENDS",),
    "_model": ("LoadedModel", "load_model"),
    "_retriever": ("Hit", "Retriever"),
}.items() for name in names}

__all__ = [
    "BACKENDS",
    "Hit",
    "LoadedModel",
    "Retriever",
    "add_faiss",
    "build_index",
    "card_path",
    "evaluate_recall",
    "export_model",
    "images_dataset",
    "load_model",
    "read_index_card",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
