"""``Retriever``: search an index folder (``ranklit index``) with images, image tensors or descriptors, from Python.

The network is rebuilt from the index's card and weights (checked against ``model_sha256``), so a query is embedded
by the model that embedded the gallery. The search is exact by default, streamed over the descriptor shards
(:func:`ranklit.index.neighbours.top_k`: memory ``O(Q·(k + chunk))``, whatever the size of the index), or by the
index's faiss structure. Optional post-processing, as in the landmark evaluation
(:mod:`ranklit.landmarks.postprocess`): a learnt whitening, α-QE, database-side augmentation, applied in order;
their gallery side is computed once, when the retriever is made.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch
from PIL import Image
from torch import Tensor

from ranklit._checkpoint import load_checkpoint
from ranklit.data.images.decoding import load_image, outside_a_run
from ranklit.deploy._faiss_backend import _faiss, faiss_search
from ranklit.deploy._index import IndexFiles, read_index_card
from ranklit.deploy._model import LoadedModel, _build_net, weights_sha256
from ranklit.deploy._queries import check_query_tensor
from ranklit.errors import UserError
from ranklit.index import Descriptors, DescriptorShards, top_k
from ranklit.landmarks.postprocess import PostProcessStep

__all__ = ["Hit", "Retriever"]

Query = str | Path | Image.Image | Tensor


@dataclass(frozen=True)
class Hit:
    """One retrieved image: its file, its score (cosine similarity) and its row in the index."""

    path: str
    score: float
    row: int


class Retriever:
    """Search an index folder. Build it with :meth:`from_index`.

    Queries (:meth:`search`): an image file path, a PIL image, a ``uint8`` image tensor ``[3, H, W]`` (each is
    preprocessed as the card says), a list of those, a float tensor ``[B, 3, H, W]`` or ``[3, H, W]`` already
    preprocessed (the network's input), or a ``[B, D]`` float tensor of descriptors of the index's model. A tensor
    of anything else (another dtype, channels last, raw 0-255 floats, NaN, another size) is refused in one line
    (:mod:`ranklit.deploy._queries`).

    Example:
        >>> import tempfile, pathlib, yaml
        >>> from PIL import Image
        >>> from ranklit.deploy import build_index, load_model
        >>> from ranklit.models import EmbeddingNet
        >>> work = pathlib.Path(tempfile.mkdtemp())
        >>> for i in range(4):
        ...     Image.new("RGB", (32, 32), (60 * i, 255 - 60 * i, 30 * i)).save(work / f"{i}.png")
        >>> net = {"class_path": "ranklit.models.EmbeddingNet",
        ...        "init_args": {"backbone": "test_resnet", "pretrained": False, "embedding_dim": 8}}
        >>> _ = (work / "config.yaml").write_text(yaml.safe_dump(
        ...     {"model": {"net": net}, "data": {"resize_size": 32, "crop_size": 32}}))
        >>> state = {f"net.{k}": v for k, v in EmbeddingNet("test_resnet", embedding_dim=8).state_dict().items()}
        >>> torch.save({"state_dict": state}, work / "model.ckpt")
        >>> model = load_model(work / "config.yaml", work / "model.ckpt")
        >>> _ = build_index(model, work, work / "index", progress=False)
        >>> hits = Retriever.from_index(work / "index").search(work / "2.png", k=2)[0]
        >>> pathlib.Path(hits[0].path).name, round(hits[0].score, 4)
        ('2.png', 1.0)
    """

    def __init__(
        self,
        folder: str | Path,
        *,
        postprocess: Sequence[PostProcessStep] = (),
        backend: str | None = None,
        nprobe: int | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        files = IndexFiles(Path(folder))
        self.card = read_index_card(files.folder)
        self.paths: list[str] = json.loads(files.paths.read_text())
        self._path_rows = {path: row for row, path in enumerate(self.paths)}
        net = _build_net(self.card["config"]["model"]["net"], files.card)
        net.load_state_dict(load_checkpoint(files.weights))
        if weights_sha256(net) != self.card["model_sha256"]:
            raise UserError(f"{files.weights} is not the network of {files.card} (model_sha256 differs): rebuild it.")
        self.device = torch.device(device)
        self.model = LoadedModel(net.eval().to(self.device), self.card)
        self._transform = self.model.transform()
        self.dim = int(self.card["output"]["embedding_dim"])
        shards = DescriptorShards(files.descriptors)
        self._dataset_index = shards.index
        self.backend = backend or self.card["index"]["backend"]
        self.nprobe = nprobe if nprobe is not None else self.card["index"].get("faiss", {}).get("nprobe")
        self._faiss: Any = None
        if self.backend != "exact":
            if postprocess:
                raise UserError("whitening, α-QE and DBA run on the exact search: add `--backend exact`.")
            if self.backend != self.card["index"]["backend"]:
                built = self.card["index"]["backend"]
                raise UserError(f"{files.folder} has no {self.backend} structure (it has: {built}); use `--backend "
                                "exact` or rebuild the index.")
            self._faiss = _faiss().read_index(str(files.faiss))
        self.steps = list(postprocess)
        self._galleries: list[Tensor | Descriptors] = []
        gallery: Tensor | Descriptors = shards
        for step in self.steps:  # the gallery side of every step, once
            step.prepare(gallery)
            self._galleries.append(gallery)
            gallery = step(torch.zeros(0, self.dim), gallery)[1]
        self.gallery = gallery

    @classmethod
    def from_index(cls, folder: str | Path, **options: Any) -> Retriever:
        """The retriever of the index folder ``folder`` (options: see the class)."""
        return cls(folder, **options)

    def _image(self, query: Query) -> Tensor:
        if isinstance(query, Tensor):
            if query.ndim != 3:
                raise UserError(f"a list of queries holds a tensor of shape {list(query.shape)}: each must be one "
                                "image [3, H, W] (pass a batch [B, 3, H, W] or descriptors [B, D] on their own).")
            if check_query_tensor(query, self.card) == "inputs":
                return query.detach().float()
        if isinstance(query, (str, Path)):
            try:
                query = load_image(query)
            except (FileNotFoundError, ValueError) as error:  # no `data.on_bad_image` to advise: not a training set
                raise UserError(f"cannot read the query: {outside_a_run(error)}") from None
        return self._transform(query)

    def embed_inputs(self, images: Sequence[Query]) -> Tensor:
        """``[B, 3, H, W]`` network inputs of image files, PIL images or image tensors (preprocessed as the card says
        unless already network inputs, :mod:`ranklit.deploy._queries`)."""
        return torch.stack([self._image(image) for image in images]) if images else torch.zeros(0, 3, 1, 1)

    def embed(self, queries: Query | Sequence[Query]) -> Tensor:
        """``[Q, D]`` descriptors of the queries (the class docstring says what a query may be; a tensor is checked
        by :func:`~ranklit.deploy._queries.check_query_tensor`)."""
        if isinstance(queries, Tensor):
            kind = check_query_tensor(queries, self.card)
            if kind == "descriptors":
                return queries.detach().float().cpu()
            if kind == "inputs":
                images = (queries if queries.ndim == 4 else queries[None]).detach().float()
            else:
                images = self.embed_inputs(list(queries) if queries.ndim == 4 else [queries])
        else:
            listed = [queries] if isinstance(queries, (str, Path, Image.Image)) else list(queries)
            images = self.embed_inputs(cast(list[Query], listed))
        with torch.no_grad():
            parts = [self.model.net(batch.to(self.device)).float().cpu() for batch in images.split(64)]
        return torch.cat(parts) if parts else torch.zeros(0, self.dim)

    def search_descriptors(self, descriptors: Tensor, k: int = 10) -> tuple[Tensor, Tensor]:
        """``(scores, rows)`` ``[Q, k']`` of descriptors ``[Q, D]``, after the post-processing steps."""
        queries = descriptors
        for step, gallery in zip(self.steps, self._galleries, strict=True):
            queries = step(queries, gallery)[0]
        if self._faiss is not None:
            return faiss_search(self._faiss, queries, min(k, len(self.paths)), nprobe=self.nprobe)
        return top_k(queries, self.gallery, k)

    def search(
        self, queries: Query | Sequence[Query], k: int = 10, *, exclude_self: bool = False
    ) -> list[list[Hit]]:
        """The ``k`` best images of the index for each query, best first (one list per query).

        With ``exclude_self``, a query given as a file path that the index holds (the same file, paths resolved) is
        left out of its own results (``k`` others are returned); queries given otherwise are unaffected.
        """
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise UserError(f"`k` must be a positive integer, got {k!r}.")
        listed: list[Query] | None = None
        if isinstance(queries, (str, Path)):
            listed = [queries]
        elif not isinstance(queries, (Tensor, Image.Image)):
            listed = list(queries)
        own = self._own_rows(listed) if exclude_self and listed is not None else None
        extra = 1 if own is not None and any(row is not None for row in own) else 0
        scores, rows = self.search_descriptors(self.embed(queries if listed is None else listed), k + extra)
        index = self._dataset_index
        hits = [
            [Hit(self.paths[int(index[r])], float(s), int(r)) for s, r in zip(row_scores, row, strict=True) if r >= 0]
            for row_scores, row in zip(scores.tolist(), rows.tolist(), strict=True)
        ]
        if own is None:
            return hits
        return [[h for h in found if int(index[h.row]) != mine][:k] for found, mine in zip(hits, own, strict=True)]

    def _own_rows(self, queries: Sequence[Query]) -> list[int | None]:
        """For each query, the position in ``paths`` of the same file (resolved path), ``None`` if absent or not a
        path."""
        return [self._path_rows.get(str(Path(q).resolve())) if isinstance(q, (str, Path)) else None for q in queries]
