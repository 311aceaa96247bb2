"""On a CUDA machine: the CUDA-only branches run for real (``python -m pytest -m gpu``; skipped without CUDA).

``tests/test_cuda_branches.py`` covers the same branches on the CPU with the device queries faked; these tests check
that the fakes tell the truth: real free-memory chunking, pinned-memory loaders and non-blocking copies, bf16 and fp16
fits (the fp16 one through the gradient scaler and multistage), the CUDA random state of multistage chunks and of
resume checkpoints; the compiled Triton kernels of the smooth-rank losses against the torch engine (float32 at the
documented tolerance, float64 to round-off, non-contiguous scores, bf16 autocast, a compiled loss).
"""

from __future__ import annotations

import lightning as L
import pytest
import torch

from ranklit.callbacks._resume import random_states, set_random_states
from ranklit.functional import hap_surrogate, retrieval_metrics, smooth_rank_engine, supap_loss
from ranklit.functional._metric_options import metrics_chunk_size
from ranklit.functional._symmetric_ranks import symmetric_tile_size
from ranklit.losses import HAPLoss, ROADMAPLoss, SmoothAPLoss, SupAPLoss
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


def _engines_agree(make_loss, embeddings: torch.Tensor, labels: torch.Tensor, rtol: float, atol: float) -> None:
    results = []
    for engine in ("torch", "triton"):
        leaf = embeddings.detach().clone().requires_grad_()
        loss = make_loss(engine)(leaf, labels)
        (grad,) = torch.autograd.grad(loss, leaf)
        results.append((loss.detach(), grad))
    (want, want_grad), (got, got_grad) = results
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol)
    torch.testing.assert_close(got_grad, want_grad, rtol=0, atol=rtol * float(want_grad.abs().max()))


def test_the_kernels_run_on_cuda_by_default() -> None:
    assert smooth_rank_engine(torch.zeros(2, 3, device=CUDA)) == "triton"
    assert smooth_rank_engine(torch.zeros(2, 3, device=CUDA, dtype=torch.bfloat16)) == "torch"


@pytest.mark.parametrize("name", ["SupAPLoss", "SmoothAPLoss", "HAPLoss", "HAPLoss_no_hrank", "ROADMAPLoss"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_compiled_kernels_give_the_torch_engines_values_and_gradients(name: str, dtype: torch.dtype) -> None:
    """700 items (not a multiple of the 128-item tiles), 2-level labels with 6 coarse groups (about 115 ranked items
    per query: several 16-item blocks), a class alone (a query without positive)."""
    makers = {
        "SupAPLoss": lambda e: SupAPLoss(engine=e), "SmoothAPLoss": lambda e: SmoothAPLoss(engine=e),
        "HAPLoss": lambda e: HAPLoss(engine=e), "HAPLoss_no_hrank": lambda e: HAPLoss(with_hrank=False, engine=e),
        "ROADMAPLoss": lambda e: ROADMAPLoss(engine=e, include_self=True),
    }  # fmt: skip
    torch.manual_seed(0)
    fine = torch.arange(700) // 4
    fine[-1] = 10_000
    labels = torch.stack([fine, fine % 6], 1) if name.startswith("HAP") else fine
    embeddings = torch.randn(700, 32, dtype=dtype)
    tolerance = (1e-4, 1e-5) if dtype == torch.float32 else (1e-10, 1e-12)
    _engines_agree(makers[name], embeddings.to(CUDA), labels.to(CUDA), *tolerance)


def test_kernels_take_non_contiguous_scores_and_bf16_autocast() -> None:
    torch.manual_seed(0)
    scores = torch.randn(500, 300, device=CUDA).T  # [300, 500], strides (1, 300)
    positives = torch.rand(300, 500, device=CUDA) < 0.05
    for fn in (lambda s, e: supap_loss(s, positives, engine=e),
               lambda s, e: hap_surrogate(s, positives.long() + positives.long(), 2, engine=e)[0].sum()):  # fmt: skip
        values = [fn(scores, engine) for engine in ("torch", "triton")]
        torch.testing.assert_close(values[1], values[0], rtol=1e-4, atol=1e-5)
    embeddings, labels = torch.randn(256, 64, device=CUDA), torch.arange(256, device=CUDA) // 4
    with torch.autocast("cuda", dtype=torch.bfloat16):
        half = torch.nn.Linear(64, 64).to(CUDA)(embeddings)  # bfloat16 embeddings: the loss computes in float32
        losses = [SupAPLoss(engine=engine)(half, labels) for engine in ("torch", "triton")]
    torch.testing.assert_close(losses[1], losses[0], rtol=1e-4, atol=1e-5)


def test_a_compiled_loss_calls_the_kernels() -> None:
    torch.manual_seed(0)
    embeddings, labels = torch.randn(384, 64, device=CUDA), torch.arange(384, device=CUDA) // 4
    loss = SupAPLoss()
    torch.testing.assert_close(torch.compile(loss)(embeddings, labels), loss(embeddings, labels), rtol=1e-5, atol=1e-6)
