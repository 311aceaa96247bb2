"""On a CUDA machine: the CUDA-only branches run for real (``python -m pytest -m gpu``; skipped without CUDA).

``tests/test_cuda_branches.py`` covers the same branches on the CPU with the device queries faked; these tests check
that the fakes tell the truth: real free-memory chunking, pinned-memory loaders and non-blocking copies, bf16 and fp16
fits (the fp16 one through the gradient scaler and multistage), the CUDA random state of multistage chunks and of
resume checkpoints.
"""

from __future__ import annotations

import lightning as L
import pytest
import torch

from ranklit.callbacks._resume import random_states, set_random_states
from ranklit.functional import retrieval_metrics
from ranklit.functional._metric_options import metrics_chunk_size
from ranklit.functional._symmetric_ranks import symmetric_tile_size
from ranklit.losses import ROADMAPLoss
from ranklit.models import EmbeddingNet, RetrievalModule
from ranklit.training import MultistageBackprop, multistage_backward
from tests.tiny import tiny_datamodule

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
CUDA = torch.device("cuda", 0)


def test_chunks_and_tiles_follow_the_real_free_memory() -> None:
    free, _ = torch.cuda.mem_get_info(CUDA)
    assert metrics_chunk_size(10**6, 10**6, 1, CUDA) == max(1, min(10**6, free // 4 // (32 * 10**6)))
    assert 1 <= symmetric_tile_size(10**6, CUDA) <= int((free // 4 // 16) ** 0.5)


@pytest.mark.parametrize("levels", [1, 2])
def test_metrics_on_the_gpu_equal_the_cpu(levels: int) -> None:
    torch.manual_seed(0)
    labels = torch.stack([torch.arange(3000) % 100, torch.arange(3000) % 10], 1)[:, :levels]
    embeddings = torch.randn(3000, 64)
    cpu = retrieval_metrics(embeddings, labels)
    gpu = retrieval_metrics(embeddings.to(CUDA), labels.to(CUDA))
    assert gpu == pytest.approx(cpu, abs=1e-6)


def _fit(precision: str, tmp_path, **options) -> L.Trainer:
    torch.manual_seed(0)
    module = RetrievalModule(EmbeddingNet("test_resnet", embedding_dim=8, freeze_batchnorm=True), ROADMAPLoss(),
                             **options)  # fmt: skip
    trainer = L.Trainer(accelerator="gpu", devices=1, precision=precision, max_steps=4, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, default_root_dir=tmp_path,
                        limit_val_batches=1, num_sanity_val_steps=0)  # fmt: skip
    datamodule = tiny_datamodule({"images_per_class": 8}, num_workers=1)
    trainer.fit(module, datamodule=datamodule)
    assert datamodule.train_dataloader().pin_memory  # the trainer runs on CUDA: memory is pinned by default
    return trainer


@pytest.mark.parametrize(("precision", "options"), [
    ("bf16-mixed", {}), ("bf16-mixed", {"channels_last": True}),
    ("16-mixed", {"multistage": MultistageBackprop(8, gradient_clip_val=1.0)}),
])  # fmt: skip
def test_mixed_precision_fits_on_the_gpu(precision: str, options: dict, tmp_path) -> None:
    trainer = _fit(precision, tmp_path, **options)
    assert trainer.global_step == 4 and torch.isfinite(trainer.callback_metrics["train/loss"])
    assert 0.0 <= float(trainer.callback_metrics["val/map_at_r"]) <= 1.0


def test_multistage_on_the_gpu_replays_the_dropout_masks_of_each_chunk() -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Dropout(0.5), torch.nn.Linear(32, 8)).to(CUDA)
    images = torch.randn(24, 16, device=CUDA)
    torch.cuda.manual_seed(5)
    expected = torch.autograd.grad(net(images).square().sum(), net[0].weight)[0]
    torch.cuda.manual_seed(5)
    multistage_backward(net, images, lambda e: e.square().sum(), chunk_size=24)  # one chunk: the same draws
    torch.testing.assert_close(net[0].weight.grad, expected)
    net.zero_grad()
    torch.cuda.manual_seed(5)
    loss, _ = multistage_backward(net, images, lambda e: e.square().sum(), chunk_size=8)  # stage 3 replays stage 1
    assert torch.isfinite(loss)


def test_resume_states_carry_the_cuda_generator() -> None:
    torch.zeros(1, device=CUDA)  # CUDA in use
    states = random_states()
    assert "cuda" in states
    first = torch.rand(3, device=CUDA)
    set_random_states(states)
    torch.testing.assert_close(torch.rand(3, device=CUDA), first)
