"""End to end: a run interrupted (Ctrl-C, SIGTERM) and resumed equals the uninterrupted run, step for step.

Each scenario trains ``RetrievalModule`` for 2 epochs of 4 P×K batches on the synthetic hierarchy, with random crops and
flips (in the main process, or in 2 loader workers), a validation per epoch, and ``ResumableTraining`` +
``FaultTolerance``. The interrupted run stops twice (Ctrl-C or ``SIGTERM`` sent to the process), each time resuming
from the checkpoint saved on the way out in a fresh process state (other global seed, new objects). The final
weights, buffers and optimiser state, and the sample ids of every trained batch, equal those of the uninterrupted run.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import Callback
from torch.utils.data import DataLoader

from ranklit.callbacks import FaultTolerance, ResumableTraining
from ranklit.data import PKSampler, SyntheticHierarchy
from ranklit.data.images.transforms import test_transform, train_transform
from ranklit.losses import ROADMAPLoss
from ranklit.models import EmbeddingNet, RetrievalModule
from ranklit.training import CrossBatchMemory, MultistageBackprop

DATA = {"num_coarse": 2, "fine_per_parent": 4, "images_per_class": 4, "image_size": 32}
EPOCHS, BATCHES = 2, 4


class _Stop(Callback):
    """Records the sample ids of every trained batch; interrupts the run after global step ``at``."""

    def __init__(self, at: int | None, how: str, seen: list[list[int]]) -> None:
        self.at, self.how, self.seen = at, how, seen

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.seen.append(batch["index"].tolist())
        if trainer.global_step == self.at:  # the run stops at the end of this batch (of the epoch, at its end)
            os.kill(os.getpid(), signal.SIGINT if self.how == "ctrl-c" else signal.SIGTERM)


def _fit(tmp_path: Path, options: dict[str, Any], stop: _Stop, ckpt_path: str | None, seed: int) -> L.Trainer:
    L.seed_everything(seed)
    train = SyntheticHierarchy(split="train", transform=train_transform(32, scale=(0.5, 1.0)), **DATA)
    val = SyntheticHierarchy(split="test", transform=test_transform(32, 32), **DATA)
    sampler = PKSampler(train.labels, p=2, k=2, seed=3, batches_per_epoch=BATCHES)
    loaders = {
        "train_dataloaders": DataLoader(train, batch_sampler=sampler, num_workers=options.get("workers", 0)),
        "val_dataloaders": DataLoader(val, batch_size=64),
    }
    net = EmbeddingNet("test_resnet", embedding_dim=8, pretrained=False)
    memory = CrossBatchMemory(size=12) if options.get("memory") else None
    chunk = options.get("multistage")
    multistage = None if chunk is None else MultistageBackprop(chunk)
    model = RetrievalModule(net, ROADMAPLoss(), memory=memory, multistage=multistage)
    trainer = L.Trainer(
        max_epochs=EPOCHS, accelerator="cpu", deterministic=True, logger=False, enable_progress_bar=False,
        enable_model_summary=False, num_sanity_val_steps=0, use_distributed_sampler=False,
        default_root_dir=tmp_path, callbacks=[ResumableTraining(), FaultTolerance(tmp_path), stop],
    )
    trainer.fit(model, **loaders, ckpt_path=ckpt_path)
    return trainer


def _state(trainer: L.Trainer) -> dict[str, torch.Tensor]:
    weights = {f"model.{k}": v for k, v in trainer.lightning_module.state_dict().items()}
    optimizer = trainer.optimizers[0].state_dict()["state"]
    return weights | {f"adam.{p}.{k}": v for p, s in optimizer.items() for k, v in s.items() if torch.is_tensor(v)}


SCENARIOS = {
    "plain": ({}, [(3, "ctrl-c"), (6, "sigterm")]),
    "memory-epoch-end": ({"memory": True}, [(4, "sigterm"), (5, "ctrl-c")]),
    "multistage": ({"multistage": 2}, [(2, "sigterm"), (7, "ctrl-c")]),
    "2-workers": ({"workers": 2}, [(3, "sigterm"), (5, "ctrl-c")]),  # augmentation seeded per sample by the sampler
}


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_interrupted_and_resumed_run_equals_the_uninterrupted_one(tmp_path: Path, scenario: str) -> None:
    options, stops = SCENARIOS[scenario]
    seen: list[list[int]] = []
    expected = _state(_fit(tmp_path / "reference", options, _Stop(None, "", seen), None, seed=0))
    reference_batches, seen = list(seen), []
    ckpt_path, seed = None, 0
    for step, how in stops:
        with pytest.raises(SystemExit):
            _fit(tmp_path / "run", options, _Stop(step, how, seen), ckpt_path, seed)
        ckpt_path, seed = str(tmp_path / "run" / "interrupted.ckpt"), seed + 100  # another global seed: restored
        assert len(seen) == step
        recorded = torch.load(ckpt_path, weights_only=True)["callbacks"]["ResumableTraining"]["seed"]
        assert recorded == 0  # the run's seed: a resumed process seeded otherwise draws from the checkpoint's states
    resumed = _fit(tmp_path / "run", options, _Stop(None, "", seen), ckpt_path, seed)
    assert resumed.global_step == EPOCHS * BATCHES
    assert seen == reference_batches  # every batch, in order, with no repeat
    actual = _state(resumed)
    assert actual.keys() == expected.keys()
    for key, value in expected.items():
        torch.testing.assert_close(actual[key], value, rtol=0, atol=1e-6, msg=key)
