"""On a CUDA machine: the CUDA-only branches run for real (``python -m pytest -m gpu``; skipped without CUDA).

The exact metrics' Triton kernel, compiled: its counts equal the torch path's on its own scores (real-valued
embeddings), and its metrics equal the CPU's where the scores are exact (integer embeddings, every tie policy).

``tests/test_cuda_branches.py`` covers the same branches on the CPU with the device queries faked; these tests check
that the fakes tell the truth: real free-memory chunking, pinned-memory loaders and non-blocking copies, bf16 and fp16
fits (the fp16 one through the gradient scaler and multistage), the CUDA random state of multistage chunks and of
resume checkpoints; the compiled Triton kernels of the smooth-rank losses against the torch engine (float32 at the
documented tolerance, float64 to round-off, non-contiguous scores, bf16 autocast, a compiled loss).
"""

from __future__ import annotations

import warnings

import lightning as L
import pytest
import torch

from ranklit.callbacks._resume import random_states, set_random_states
from ranklit.functional import hap_surrogate, retrieval_metrics, smooth_rank_engine, supap_loss
from ranklit.functional.metrics._options import metrics_chunk_size
from ranklit.functional.metrics._symmetric_ranks import symmetric_tile_size
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


def _kernel_problem(levels: int, integers: bool) -> dict:
    """3,001 queries (programs of 32) against 2,050 items (tiles of 64), d = 100 (slices of 32): every tile edge."""
    g = torch.Generator().manual_seed(levels)
    fine, ref_fine = torch.randint(0, 40, (3001,), generator=g), torch.randint(0, 40, (2050,), generator=g)
    draw = (lambda *shape: torch.randint(-1, 2, shape, generator=g).float()) if integers else (
        lambda *shape: torch.randn(*shape, generator=g))
    return {"embeddings": draw(3001, 100), "labels": torch.stack([fine, fine // 4], 1)[:, :levels],
            "ref_embeddings": draw(2050, 100), "ref_labels": torch.stack([ref_fine, ref_fine // 4], 1)[:, :levels],
            "ids": torch.arange(3001) % 700, "ref_ids": torch.arange(2050) % 900,
            "junk": torch.rand(3001, 2050, generator=g) < 0.05}


def _on(device: torch.device, problem: dict) -> dict:
    return {key: value.to(device) for key, value in problem.items()}


@pytest.mark.parametrize("strict", [False, True])
def test_compiled_kernel_counts_equal_the_torch_counts_on_its_own_scores(strict: bool) -> None:
    from ranklit.functional.inputs import prepare_inputs
    from ranklit.functional.metrics._kernel_counts import KernelCounter
    from ranklit.functional.metrics._positive_ranks import SortedKeys, positive_counts

    p = _on(CUDA, _kernel_problem(1, integers=False))
    x = prepare_inputs(p["embeddings"], p["labels"], ref_embeddings=p["ref_embeddings"], ref_labels=p["ref_labels"],
                       ids=p["ids"], ref_ids=p["ref_ids"])
    counter = KernelCounter(x, p["junk"])
    rows = counter.by_label(torch.arange(3001, device=CUDA))
    counts, scores = counter.counts(rows, strict), counter.scores(rows)
    finite = torch.isfinite(scores)
    assert torch.equal(~finite, p["junk"][rows] | (p["ids"][rows, None] == p["ref_ids"][None, :]))
    torch.testing.assert_close(scores[finite], (x.queries[rows] @ x.refs.T)[finite], rtol=0, atol=1e-5)
    descending, valid, at_least, above = positive_counts(
        scores, *SortedKeys(x.ref_labels[:, 0]).match(x.query_labels[rows, 0]), strict=strict
    )
    assert torch.equal(counts.descending, descending) and torch.equal(counts.valid, valid)
    assert torch.equal(counts.at_least, at_least)
    assert (above is None) == (counts.above is None) and (above is None or torch.equal(counts.above, above))


@pytest.mark.parametrize("ties", ["pessimistic", "average", "optimistic"])
@pytest.mark.parametrize("case", ["self", "gallery", "hierarchical"])
def test_gpu_metrics_through_the_kernel_equal_the_cpu_ties_included(
    case: str, ties: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ranklit.functional.metrics import _kernel_counts
    from ranklit.functional.metrics._retrieval import retrieval_metric_tensors

    launches = []
    real = _kernel_counts.KernelCounter.counts
    monkeypatch.setattr(_kernel_counts.KernelCounter, "counts", lambda self, *a: launches.append(1) or real(self, *a))
    p = _kernel_problem(2 if case == "hierarchical" else 1, integers=True)  # exact scores: ties, no round-off
    if case != "gallery":
        p = {"embeddings": p["ref_embeddings"], "labels": p["ref_labels"]}
    options = {"ties": ties, "normalize": False, "per_query": True}
    cpu = retrieval_metric_tensors(**p, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning: the kernel runs
        gpu = retrieval_metric_tensors(**_on(CUDA, p), **options)
    assert launches
    for key, value in cpu.items():
        torch.testing.assert_close(gpu[key].cpu(), value, rtol=0, atol=1e-12, equal_nan=True, msg=key)


def test_float64_and_the_switch_keep_the_torch_path_on_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    embeddings, labels = torch.randn(300, 16, dtype=torch.float64), torch.arange(300) % 30
    cpu = retrieval_metrics(embeddings, labels)
    with pytest.warns(UserWarning, match="float64"):
        assert retrieval_metrics(embeddings.to(CUDA), labels.to(CUDA)) == pytest.approx(cpu, abs=1e-9)
    monkeypatch.setenv("RANKLIT_METRICS_KERNEL", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert retrieval_metrics(embeddings.float().to(CUDA), labels.to(CUDA)) == pytest.approx(
            retrieval_metrics(embeddings.float(), labels), abs=1e-6
        )


def _fit(precision: str, tmp_path, **options) -> L.Trainer:
    torch.manual_seed(0)
    module = RetrievalModule(EmbeddingNet("test_resnet", embedding_dim=8, freeze_batchnorm=True), ROADMAPLoss(),
                             **options)
    trainer = L.Trainer(accelerator="gpu", devices=1, precision=precision, max_steps=4, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, default_root_dir=tmp_path,
                        limit_val_batches=1, num_sanity_val_steps=0)
    datamodule = tiny_datamodule({"images_per_class": 8}, num_workers=1)
    trainer.fit(module, datamodule=datamodule)
    assert datamodule.train_dataloader().pin_memory  # the trainer runs on CUDA: memory is pinned by default
    return trainer


@pytest.mark.parametrize(("precision", "options"), [
    ("bf16-mixed", {}), ("bf16-mixed", {"channels_last": True}),
    ("16-mixed", {"multistage": MultistageBackprop(8, gradient_clip_val=1.0)}),
])
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


GPU_DECODE_TOLERANCE = 1.5  # mean |difference| of 255 from the CPU path: a bound to confirm, NOT yet measured on a GPU


def test_decoding_on_the_gpu_is_within_tolerance_of_the_cpu_path(tmp_path) -> None:
    """nvJPEG (IDCT, chroma upsampling) and the float resize on CUDA against the CPU path, on every chroma layout,
    progressive, grayscale, EXIF-rotated JPEGs and a PNG and a CMYK JPEG among them (those decoded by the CPU path in
    the worker)."""
    from PIL import Image

    from ranklit.data.images._crop_first import crop_first
    from ranklit.data.images._device_decode import decode_encoded, device_decoder
    from ranklit.data.images._encoded import collate
    from ranklit.data.images.transforms import test_transform, train_transform
    from tests.data.test_decoding import _photo

    assert device_decoder(CUDA) is not None  # nvJPEG reads the probes as Pillow does within PROBE_TOLERANCE["cuda"]
    photo, exif = Image.fromarray(_photo(640, 480)), Image.Exif()
    exif[0x0112] = 6
    for name, options in {"420": {"subsampling": 2}, "422": {"subsampling": 1}, "444": {"subsampling": 0},
                          "progressive": {"progressive": True}, "rotated": {"exif": exif}}.items():
        photo.save(tmp_path / f"{name}.jpg", quality=90, **options)
    photo.convert("L").save(tmp_path / "gray.jpg", quality=90)
    photo.convert("CMYK").save(tmp_path / "cmyk.jpg", quality=90)
    photo.save(tmp_path / "png.png")
    Image.fromarray(_photo(1600, 1200)).save(tmp_path / "big.jpg", quality=90)  # the CPU path reduces it
    for transform in (train_transform(224), test_transform(256, 224)):
        cpu, device = crop_first(transform, on_device=True), crop_first(transform, on_device=True)
        device.encode = True
        items, expected = [], []
        for seed, path in enumerate(sorted(tmp_path.iterdir())):
            torch.manual_seed(seed)
            expected.append(cpu.from_file(path))
            torch.manual_seed(seed)
            items.append({"image": device.from_file(path), "label": torch.tensor(0)})
        batch = collate(items)
        images = decode_encoded(batch["encoded"].pin_memory(), batch["image"].to(CUDA)).cpu()
        differences = {path.name: round((image.float() - want.float()).abs().mean().item(), 3)
                       for path, image, want in zip(sorted(tmp_path.iterdir()), images, expected, strict=True)}
        assert max(differences.values()) <= GPU_DECODE_TOLERANCE, differences  # (benchmarks/fit_throughput.py
        # measures them on its JPEGs)


def test_decoding_on_the_gpu_resumes_exactly(tmp_path) -> None:
    from tests.callbacks.test_resume_e2e import _state, _Stop
    from tests.data.test_device_decode_fit import BATCHES, EPOCHS, assert_same, fit, jpeg_classes

    root = jpeg_classes(tmp_path / "jpegs")
    seen: list[list[int]] = []
    expected = _state(fit(root, tmp_path / "reference", True, _Stop(None, "", seen), None, 0, accelerator="gpu"))
    reference, seen = list(seen), []
    with pytest.raises(SystemExit):
        fit(root, tmp_path / "run", True, _Stop(4, "sigterm", seen), None, 0, accelerator="gpu")
    resumed = fit(root, tmp_path / "run", True, _Stop(None, "", seen), str(tmp_path / "run" / "interrupted.ckpt"), 100,
                  accelerator="gpu")
    assert resumed.global_step == EPOCHS * BATCHES and seen == reference
    assert_same(_state(resumed), expected)


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
    }
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
               lambda s, e: hap_surrogate(s, positives.long() + positives.long(), 2, engine=e)[0].sum()):
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
