"""A search index on disk: the descriptors of a folder (or CSV) of images, their paths, the network and its card.

Layout of an index folder ``I``::

    index.json        the model's card (:mod:`ranklit.deploy._model`) plus "index": images, count, block_rows,
                      complete, backend, faiss settings, evaluation; written first (complete: false), rewritten last
    paths.json        the image files, absolute, in dataset order (row ``i`` of ``descriptors.index`` is one of them)
    net.pt            the network's weights (the card's config rebuilds it; ``model_sha256`` checks it)
    descriptors/      numpy shards (:mod:`ranklit.index.descriptors`), one writer per block and rank:
                      block<b>-rank<r>.json, ...
    faiss.index       with a faiss backend (:mod:`ranklit.deploy._faiss_backend`)

**Building** runs Lightning's predict loop (progress bar; ``devices`` > 1 splits each block between processes) over
blocks of ``block_rows`` images, each written by :class:`ranklit.callbacks.EmbeddingWriter` and complete once its
manifests are marked complete; ``SIGTERM``/Ctrl-C stops it after a batch (exit 143/130). **Resuming**: the same
command on the same folder skips the complete blocks and embeds the others again (replacing their files); a folder
holding an index of another model or of other images is refused (a :class:`UserError`), never mixed.
"""

from __future__ import annotations

import json
import logging
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, Subset

from ranklit._checks import check_positive_int
from ranklit.deploy._model import CARD_FORMAT, LoadedModel
from ranklit.errors import UserError
from ranklit.index import DescriptorShards

__all__ = ["IndexFiles", "build_index", "images_dataset", "read_index_card"]

CARD = "index.json"
_RERUN = "run the same `ranklit index` command again: it keeps the complete blocks and embeds the others"


@dataclass(frozen=True)
class IndexFiles:
    """The files of the index folder ``folder`` (module docstring)."""

    folder: Path

    @property
    def card(self) -> Path:
        return self.folder / CARD

    @property
    def paths(self) -> Path:
        return self.folder / "paths.json"

    @property
    def weights(self) -> Path:
        return self.folder / "net.pt"

    @property
    def descriptors(self) -> Path:
        return self.folder / "descriptors"

    @property
    def faiss(self) -> Path:
        return self.folder / "faiss.index"


def read_index_card(folder: str | Path, *, complete: bool = True) -> dict[str, Any]:
    """The card of the index folder ``folder``; a missing, foreign or (with ``complete``) unfinished one is a
    :class:`UserError` naming the folder and the fix."""
    files = IndexFiles(Path(folder))
    if not files.folder.is_dir():
        raise UserError(f"index folder {files.folder} not found: build one with `ranklit index ... --output FOLDER`.")
    try:
        card = json.loads(files.card.read_text())
    except (OSError, ValueError):
        card = None
    if not isinstance(card, dict) or card.get("format") != CARD_FORMAT or "index" not in card:
        raise UserError(
            f"{files.folder} is not a ranklit index (no valid {CARD}): give a folder written by `ranklit index`."
        )
    if complete and not card["index"].get("complete"):
        raise UserError(
            f"the index {files.folder} is unfinished (its build was interrupted): run the same `ranklit index` "
            "command again to finish it."
        )
    return card


def images_dataset(images: str | Path, transform: Any = None, split: str | None = None) -> Dataset:
    """The images of ``images``: a folder (every image file under it) or a CSV file with a ``path`` column (paths
    relative to the CSV's folder, inside it), as :class:`ranklit.data.ImageFiles`; ``split``: the rows of a CSV with
    a ``split`` column to read (``"all"`` for every row; ``None`` is refused for such a CSV)."""
    from ranklit.data import ImageFiles

    source = Path(images)
    if not source.is_dir() and not (source.is_file() and source.suffix.lower() == ".csv"):
        raise UserError(f"{source}: no such folder or .csv file of images.")
    try:
        if source.is_dir():
            return ImageFiles(source, split, transform=transform)
        return ImageFiles(source.parent, split, transform=transform, csv_file=source.resolve())
    except ValueError as error:  # e.g. a folder without images: the reader's message names it
        raise UserError(str(error)) from None


def _check_existing(files: IndexFiles, card: dict[str, Any], paths: list[str]) -> None:
    """Refuse to write into a folder that holds something else than this index (partly) built, or into a file."""
    if files.folder.exists() and not files.folder.is_dir():
        raise UserError(f"the index's output {files.folder} is a file: `--output` names the folder to write the index "
                        "into (a new or empty one, or the index being resumed).")
    if not files.folder.exists() or not any(files.folder.iterdir()):
        return
    old = read_index_card(files.folder, complete=False)
    if old["model_sha256"] != card["model_sha256"]:
        raise UserError(
            f"{files.folder} holds an index built by another model (checkpoint {old.get('checkpoint')}): give "
            "another `--output` folder, or delete this one."
        )
    if json.loads(files.paths.read_text()) != paths:
        raise UserError(
            f"{files.folder} holds an index of other images ({old['index']['images']}): give another `--output` "
            "folder, or delete this one."
        )


def _write_card(files: IndexFiles, card: dict[str, Any]) -> None:
    temporary = files.folder / f".{CARD}.tmp"
    temporary.write_text(json.dumps(card, indent=2))
    temporary.replace(files.card)


@contextmanager
def _quiet_lightning() -> Any:
    """Lightning's set-up notes ("GPU available", "LOCAL_RANK") once per block would drown the progress bars."""
    logger = logging.getLogger("lightning.pytorch")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def _block_done(folder: Path, prefix: str, ranks: int) -> bool:
    """Whether the manifests of every rank of the block ``prefix`` are there and marked complete (an interrupted
    block is embedded again: its writer replaces its files)."""
    for rank in range(ranks):
        try:
            meta = json.loads((folder / f"{prefix}rank{rank}.json").read_text())
        except (OSError, ValueError):
            return False
        if not isinstance(meta, dict) or meta.get("complete") is not True or meta.get("ranks") != ranks:
            return False
    return True


def _embed_blocks(model: LoadedModel, data: Dataset, files: IndexFiles, settings: dict[str, Any]) -> bool:
    """Embed every block not yet complete; ``True`` on the process that writes the card (global rank 0)."""
    import lightning as L

    from ranklit.callbacks import EmbeddingWriter

    class _Embedder(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = model.net

        def predict_step(self, batch: dict[str, Tensor], batch_idx: int) -> dict[str, Tensor]:
            return {"embeddings": self.net(batch["image"]), "labels": batch["label"], "index": batch["index"]}

    embedder, rows, rank_zero = _Embedder().eval(), settings["block_rows"], True
    for number, start in enumerate(range(0, len(data), rows)):  # type: ignore[arg-type]
        prefix = f"block{number:05d}-"
        with _quiet_lightning():
            trainer = L.Trainer(
                accelerator=settings["accelerator"], devices=settings["devices"], logger=False,
                enable_checkpointing=False, enable_progress_bar=settings["progress"], enable_model_summary=False,
                callbacks=[EmbeddingWriter(str(files.descriptors), prefix=prefix, overwrite=True, rerun=_RERUN)],
            )
            rank_zero = trainer.is_global_zero
            if _block_done(files.descriptors, prefix, trainer.world_size):
                continue
            block = Subset(data, range(start, min(start + rows, len(data))))  # type: ignore[arg-type]
            loader = DataLoader(block, batch_size=settings["batch_size"], num_workers=settings["num_workers"])
            trainer.predict(embedder, dataloaders=loader, return_predictions=False)
            trainer.strategy.barrier("ranklit-index-block")  # every rank's manifest is written before rank 0 goes on
    return rank_zero


def build_index(
    model: LoadedModel,
    images: str | Path,
    output: str | Path,
    *,
    batch_size: int = 64,
    num_workers: int = 0,
    accelerator: str = "auto",
    devices: int | str = 1,
    block_rows: int = 50_000,
    progress: bool = True,
    split: str | None = None,
) -> dict[str, Any]:
    """Embed the images of ``images`` (folder or CSV) with ``model`` into the index folder ``output`` (exact search).

    Re-running on the same ``output`` resumes (module docstring). A faiss structure is added by
    :func:`ranklit.deploy.add_faiss`. ``split``: which rows of a CSV with a ``split`` column to embed (e.g.
    ``"test"``, or ``"all"``), required for such a CSV (:class:`ranklit.data.ImageFiles`). Returns the card written.
    """
    check_positive_int("block_rows", block_rows, " (images per resumable block)")
    files = IndexFiles(Path(output))
    data = images_dataset(images, model.transform(), split)
    paths = [str(Path(p).resolve()) for p in data.paths]  # type: ignore[attr-defined]
    settings = {"batch_size": batch_size, "num_workers": num_workers, "accelerator": accelerator, "devices": devices,
                "block_rows": block_rows, "progress": progress}
    card = {
        **model.card,
        "index": {"images": str(Path(images).resolve()), "split": split, "count": len(paths),
                  "block_rows": block_rows, "complete": False, "backend": "exact"},
    }
    _check_existing(files, card, paths)
    try:
        files.folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as error:  # a file on the way (a permission is the CLI's to explain)
        raise UserError(f"cannot create the index folder {files.folder}: {error.strerror} ({error.filename}); give "
                        "`--output` a folder path whose parents are folders.") from None
    if not files.card.is_file():
        files.paths.write_text(json.dumps(paths))
        torch.save(model.net.state_dict(), files.weights)
        _write_card(files, card)
    else:
        card["index"]["block_rows"] = read_index_card(files.folder, complete=False)["index"]["block_rows"]
        settings["block_rows"] = card["index"]["block_rows"]  # resumed: the blocks as they were first cut
    if _embed_blocks(model, data, files, settings):
        if DescriptorShards(files.descriptors).num_rows != len(paths):
            raise RuntimeError(f"{files.descriptors}: descriptors of {len(paths)} images expected.")
        card["index"]["complete"] = True
        _write_card(files, card)
    return card
