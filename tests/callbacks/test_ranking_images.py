"""``RankingGridLogger``: logs one ranking grid per validation to wandb (offline), is a no-op for other loggers."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch
from lightning.pytorch.loggers import CSVLogger, WandbLogger

from ranklit.callbacks import _ranking_images as ranking_images
from ranklit.callbacks._ranking_images import RankingGridLogger
from ranklit.data import RetrievalDataModule, SyntheticHierarchy
from ranklit.losses import ROADMAPLoss
from ranklit.models import EmbeddingNet, RetrievalModule
from tests.tiny import SMALL, tiny_datamodule


def _datamodule(**kwargs: object) -> RetrievalDataModule:
    return tiny_datamodule(p=2, size=16, eval_batch_size=6, **kwargs)


def _module() -> RetrievalModule:
    return RetrievalModule(EmbeddingNet("test_resnet", embedding_dim=8), ROADMAPLoss())


def _trainer(logger: object, callback: RankingGridLogger, tmp_path: Path, max_epochs: int = 1) -> L.Trainer:
    return L.Trainer(
        max_epochs=max_epochs, limit_train_batches=1, logger=logger, callbacks=[callback], enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, use_distributed_sampler=False,
        num_sanity_val_steps=0, default_root_dir=tmp_path, accelerator="cpu", devices=1,
    )


@pytest.fixture(scope="module")
def wandb_logger(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """One offline run for the module (starting a wandb run takes seconds)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WANDB_MODE", "offline")
        patch.setenv("WANDB_SILENT", "true")
        logger = WandbLogger(offline=True, save_dir=str(tmp_path_factory.mktemp("wandb")), project="ranklit-test")
        yield logger
        logger.experiment.finish()


def test_logs_one_grid_per_validation_to_wandb(
    wandb_logger: WandbLogger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict] = []
    original = WandbLogger.log_image

    def spy(self: WandbLogger, key: str, images: list, step: int | None = None, **kwargs: object) -> None:
        calls.append({"key": key, "images": images, "step": step})
        original(self, key=key, images=images, step=step, **kwargs)

    monkeypatch.setattr(WandbLogger, "log_image", spy)
    trainer = _trainer(wandb_logger, RankingGridLogger(num_queries=3, top_k=4), tmp_path)
    model, data = _module(), _datamodule()
    trainer.validate(model, datamodule=data, verbose=False)  # the baseline validation of the CLI: step 0
    trainer.fit(model, datamodule=data)
    assert [(c["key"], c["step"]) for c in calls] == [("val/rankings", 0), ("val/rankings", 1)]
    image = calls[-1]["images"][0]
    assert isinstance(image, np.ndarray) and image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
    assert image.shape[0] > image.shape[1] / 2  # three rows of 1 query + 4 retrieved items
    run_dir = Path(wandb_logger.experiment.dir)
    assert list(run_dir.rglob("*.png")), "the offline wandb run holds no image file"


def test_grid_ranks_fixed_queries_against_the_validation_set(
    wandb_logger: WandbLogger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[dict] = []
    original = ranking_images.retrieve

    def spy(embeddings: torch.Tensor, labels: torch.Tensor, **kwargs: torch.Tensor) -> object:
        seen.append({"queries": embeddings, **kwargs})
        return original(embeddings, labels, **kwargs)

    monkeypatch.setattr(ranking_images, "retrieve", spy)
    data = _datamodule()
    trainer = _trainer(wandb_logger, RankingGridLogger(num_queries=4, top_k=100), tmp_path)
    trainer.validate(_module(), datamodule=data, verbose=False)
    (call,) = seen
    num_val = len(data.val_dataset)
    assert call["ref_embeddings"].shape[0] == num_val and call["queries"].shape[0] == 4
    assert call["ids"].tolist() == [0, 5, 10, 15]  # evenly spaced, self excluded by id
    assert call["ref_ids"].tolist() == list(range(num_val))
    assert call["top_k"] == num_val - 1  # clipped to the retrieval set without the query


def test_query_gallery_evaluation_ranks_against_the_gallery(
    wandb_logger: WandbLogger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[dict] = []
    original = ranking_images.retrieve

    def spy(embeddings: torch.Tensor, labels: torch.Tensor, **kwargs: torch.Tensor) -> object:
        seen.append(kwargs)
        return original(embeddings, labels, **kwargs)

    monkeypatch.setattr(ranking_images, "retrieve", spy)
    data = _datamodule(gallery_dataset=SyntheticHierarchy(split="train", **{**SMALL, "image_size": 16}))
    trainer = _trainer(wandb_logger, RankingGridLogger(num_queries=2, top_k=3), tmp_path)
    trainer.validate(_module(), datamodule=data, verbose=False)
    (call,) = seen
    assert call["ref_embeddings"].shape[0] == len(data.gallery_dataset)
    assert "ids" not in call  # query and gallery are separate sets: nothing excluded


def test_other_loggers_cost_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _module()
    calls = []
    monkeypatch.setattr(ranking_images, "ranking_grid", lambda *a, **k: calls.append(a))
    forward = model.forward
    counted: list[int] = []
    monkeypatch.setattr(model, "forward", lambda images: counted.append(1) or forward(images))
    trainer = _trainer(CSVLogger(tmp_path), RankingGridLogger(), tmp_path)
    trainer.validate(model, datamodule=_datamodule(), verbose=False)
    assert not calls and not counted  # validation_step calls the net directly; no extra forward pass


def test_every_n_epochs_skips_other_epochs(wandb_logger: WandbLogger, tmp_path: Path, monkeypatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(WandbLogger, "log_image", lambda self, key, images, step=None, **k: calls.append(step))
    trainer = _trainer(wandb_logger, RankingGridLogger(num_queries=2, top_k=2, every_n_epochs=2), tmp_path, 3)
    trainer.fit(_module(), datamodule=_datamodule())
    assert calls == [1, 3]  # validations after epochs 0 and 2


def test_rejects_batches_that_are_not_ranklit_dictionaries(wandb_logger: WandbLogger, tmp_path: Path) -> None:
    callback = RankingGridLogger()
    trainer = _trainer(wandb_logger, callback, tmp_path)
    callback._active = True
    with pytest.raises(TypeError, match="'image', 'label' and 'index'"):
        callback.on_validation_batch_end(trainer, _module(), None, (torch.zeros(1, 3, 8, 8), torch.zeros(1)), 0)


@pytest.mark.parametrize("name", ["num_queries", "top_k", "every_n_epochs"])
def test_rejects_non_positive_sizes(name: str) -> None:
    with pytest.raises(ValueError, match=name):
        RankingGridLogger(**{name: 0})
