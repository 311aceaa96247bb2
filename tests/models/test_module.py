"""``RetrievalModule``: NaN guard, parameter groups, multistage = plain backprop, memory, schedulers, bf16,
gap logging."""

from __future__ import annotations

import copy
import re
from functools import partial

import lightning as L
import pytest
import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader

from ranklit.data import RetrievalDataModule
from ranklit.losses import HAPPIERLoss, ROADMAPLoss, SmoothAPLoss
from ranklit.metrics import RetrievalMetrics
from ranklit.models import EmbeddingNet, RetrievalModule
from ranklit.training import CrossBatchMemory, MultistageBackprop
from tests.tiny import tiny_datamodule


def _datamodule(batch_size: int = 16) -> RetrievalDataModule:
    return tiny_datamodule({"images_per_class": 8}, p=batch_size // 4, eval_batch_size=64)


def _trainer(**kwargs) -> L.Trainer:
    options = dict(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        use_distributed_sampler=False,
        num_sanity_val_steps=0,
    )
    return L.Trainer(**{**options, **kwargs})


def _net() -> EmbeddingNet:
    torch.manual_seed(0)
    return EmbeddingNet("test_resnet", embedding_dim=8)


def _multistage(chunk: int | None) -> MultistageBackprop | None:
    return None if chunk is None else MultistageBackprop(chunk)


class _NanLoss(nn.Module):
    def forward(self, embeddings: Tensor, labels: Tensor, **refs: Tensor) -> Tensor:
        return embeddings.sum() * float("nan")


@pytest.mark.parametrize("chunk", [None, 8])
def test_nan_loss_stops_training_naming_the_global_step(chunk: int | None) -> None:
    module = RetrievalModule(_net(), _NanLoss(), multistage=_multistage(chunk))
    with pytest.raises(FloatingPointError, match=r"_NanLoss\) is nan at global step 0 \(epoch 0, batch 0\)"):
        _trainer(fast_dev_run=1).fit(module, datamodule=_datamodule())


def test_nan_embeddings_name_the_precision_and_the_input_size_besides_the_learning_rate() -> None:
    """Issue 47 item 9: bf16 on the CPU with tiny images gives NaN gradients (PyTorch's oneDNN convolutions), which met
    "check the network's output and the learning rate" only; the error names the run's precision, device and image
    size with their ways out."""
    net = _net()
    with torch.no_grad():
        net.head.weight.fill_(float("nan"))  # what a NaN gradient step leaves
    module = RetrievalModule(net, SmoothAPLoss())
    with pytest.raises(FloatingPointError) as stopped:
        _trainer(fast_dev_run=1, precision="bf16-mixed").fit(module, datamodule=_datamodule())
    message = str(stopped.value)
    assert "The network's embeddings hold NaN or infinite values at global step 0 (epoch 0, batch 0)" in message
    assert "the learning rate" in message and "`--trainer.precision bf16-mixed` on the cpu" in message
    assert "bf16 on the CPU" in message and "try `--trainer.precision 32`" in message
    assert re.search(r"the input size \(\d+ x \d+ images", message) and "--data.crop_size" in message, message


class _ProxyLoss(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proxies = nn.Parameter(torch.randn(3, 8))

    def forward(self, embeddings: Tensor, labels: Tensor, **refs: Tensor) -> Tensor:
        return (embeddings @ self.proxies.T).mean()


def test_parameter_groups_get_head_and_loss_learning_rates() -> None:
    net, loss = _net(), _ProxyLoss()
    module = RetrievalModule(net, loss, optimizer=partial(torch.optim.SGD, lr=0.1), head_lr=0.5, loss_lr=7.0)
    groups = {g["name"]: g for g in module.configure_optimizers().param_groups}
    assert [groups[n]["lr"] for n in ("backbone", "head", "loss")] == [0.1, 0.5, 7.0]
    assert {id(p) for p in groups["head"]["params"]} == {id(p) for p in net.head_parameters()}
    assert [id(p) for p in groups["loss"]["params"]] == [id(loss.proxies)]
    assert len(groups["backbone"]["params"]) == len(list(net.backbone.parameters()))


def test_invalid_options_are_rejected() -> None:
    with pytest.raises(ValueError, match="`chunk_size` must be a positive integer"):
        MultistageBackprop(0)
    with pytest.raises(ValueError, match="`gradient_clip_val` must be positive"):
        MultistageBackprop(4, gradient_clip_val=0.0)
    with pytest.raises(ValueError, match="'epoch' or 'step', got 'batch'"):
        RetrievalModule(_net(), SmoothAPLoss(), lr_scheduler_interval="batch")


def _one_batch_loader(images: Tensor, labels: Tensor, steps: int = 1) -> DataLoader:
    batch = {"image": images, "label": labels, "index": torch.arange(images.shape[0])}
    return DataLoader([batch] * steps, batch_size=None)


def _fit(module: RetrievalModule, loader: DataLoader, **trainer) -> RetrievalModule:
    _trainer(**{"max_epochs": 1, **trainer}).fit(module, train_dataloaders=loader)
    return module


def test_multistage_step_equals_the_plain_step() -> None:
    """Same initial weights, same batch, SGD: the weights after one step agree (frozen batch-norm, no dropout)."""
    torch.manual_seed(0)
    net = EmbeddingNet("test_resnet", embedding_dim=8, freeze_batchnorm=True)
    net.train()  # puts the frozen batch-norm layers in eval mode (Lightning keeps the modes it is given)
    images, labels = torch.randn(20, 3, 16, 16), torch.arange(20) // 4
    sgd = partial(torch.optim.SGD, lr=0.5)
    plain = _fit(RetrievalModule(copy.deepcopy(net), ROADMAPLoss(), optimizer=sgd), _one_batch_loader(images, labels))
    multi = RetrievalModule(copy.deepcopy(net), ROADMAPLoss(), optimizer=sgd, multistage=MultistageBackprop(8))
    _fit(multi, _one_batch_loader(images, labels))
    moved = [(a - b).abs().max() for a, b in zip(plain.net.parameters(), net.parameters(), strict=True)]
    assert max(moved) > 1e-4  # the step did something
    for a, b in zip(plain.net.parameters(), multi.net.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(("interval", "final_lr"), [("epoch", 0.5**3), ("step", 0.5**6)])  # 3 epochs of 2 steps
def test_multistage_steps_schedulers_like_automatic_mode_and_clips(interval: str, final_lr: float) -> None:
    images, labels = torch.randn(8, 3, 16, 16), torch.arange(8) // 4
    sgd, step_lr = partial(torch.optim.SGD, lr=1.0), partial(torch.optim.lr_scheduler.StepLR, step_size=1, gamma=0.5)
    lrs = []
    for chunk, clip in ((None, None), (4, 1e-6)):
        module = RetrievalModule(
            _net(), SmoothAPLoss(), optimizer=sgd, lr_scheduler=step_lr, lr_scheduler_interval=interval,
            multistage=None if chunk is None else MultistageBackprop(chunk, gradient_clip_val=clip),
        )
        before = [p.detach().clone() for p in module.net.parameters()]
        _fit(module, _one_batch_loader(images, labels, steps=2), max_epochs=3)
        lrs.append(module.trainer.optimizers[0].param_groups[0]["lr"])
        if clip is not None:  # 6 steps of lr <= 1 with gradient norm <= 1e-6
            pairs = zip(module.net.parameters(), before, strict=True)
            change = torch.cat([(p.detach() - b).flatten() for p, b in pairs])
            assert 0 < change.norm() <= 6e-6
    assert lrs == [final_lr, final_lr]


def test_memory_and_decomposability_gap_are_logged() -> None:
    memory = CrossBatchMemory(size=16, start_step=1)
    module = RetrievalModule(_net(), ROADMAPLoss(), memory=memory, decomposability_gap=True)
    trainer = _trainer(max_epochs=2, limit_val_batches=0)
    trainer.fit(module, datamodule=_datamodule())
    assert trainer.global_step >= 2 and len(memory) == 16
    assert memory.ids.unique().numel() == 16
    logged = trainer.callback_metrics
    assert {"train/batch_map", "train/map", "train/decomposability_gap"} <= set(logged)
    gap = logged["train/batch_map"] - logged["train/map"]
    assert float(logged["train/decomposability_gap"]) == pytest.approx(float(gap), abs=1e-6)


@pytest.mark.parametrize("ties", ["pessimistic", "optimistic"])
def test_the_decomposability_gap_follows_the_metric_tie_policy(ties: str) -> None:
    module = RetrievalModule(_net(), ROADMAPLoss(), metric=RetrievalMetrics(ties=ties), decomposability_gap=True)
    assert module.train_gap is not None and module.train_gap.ties == ties


class _RecordingROADMAPLoss(ROADMAPLoss):
    """ROADMAP that records, at each call, the embeddings' dtype, whether autocast was on, and the loss's dtype."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[torch.dtype, bool, torch.dtype]] = []

    def forward(self, embeddings: Tensor, labels: Tensor, **refs: Tensor) -> Tensor:
        loss = super().forward(embeddings, labels, **refs)
        self.calls.append((embeddings.dtype, torch.is_autocast_enabled("cpu"), loss.dtype))
        return loss


def _first_step_loss(precision: str, chunk: int | None) -> tuple[float, _RecordingROADMAPLoss, CrossBatchMemory]:
    memory, loss = CrossBatchMemory(size=16), _RecordingROADMAPLoss()
    module = RetrievalModule(_net(), loss, memory=memory, multistage=_multistage(chunk))  # _net() seeds the run
    trainer = _trainer(fast_dev_run=1, precision=precision)
    trainer.fit(module, datamodule=_datamodule())
    return float(trainer.callback_metrics["train/loss"]), loss, memory


@pytest.mark.parametrize("chunk", [None, 8])
def test_bf16_mixed_precision_trains_with_the_loss_in_float32(chunk: int | None) -> None:
    bf16, loss, memory = _first_step_loss("bf16-mixed", chunk)
    assert loss.calls and all(call == (torch.float32, False, torch.float32) for call in loss.calls)
    assert len(memory) == 16 and memory.embeddings.dtype == torch.float32
    # the same first batch and weights in float32: only the network's bf16 rounding separates the two losses
    fp32, _, _ = _first_step_loss("32-true", chunk)
    assert bf16 == pytest.approx(fp32, abs=0.01) and bf16 != fp32

def test_proxy_loss_is_sized_from_the_training_set_and_the_net(tmp_path) -> None:
    module = RetrievalModule(_net(), HAPPIERLoss())  # no num_classes / embedding_dim given
    assert module.loss.cluster.proxies is None
    trainer = _trainer(fast_dev_run=1)
    data = _datamodule()
    trainer.fit(module, datamodule=data)
    assert module.loss.cluster.proxies.shape == (data.num_classes, 8)
    trainer.save_checkpoint(tmp_path / "run.ckpt")
    reloaded = RetrievalModule.load_from_checkpoint(tmp_path / "run.ckpt", net=_net(), loss=HAPPIERLoss())
    torch.testing.assert_close(reloaded.loss.cluster.proxies, module.loss.cluster.proxies)


def test_checkpoint_of_another_shape_is_refused_naming_tensors_and_keys(tmp_path) -> None:
    module = RetrievalModule(_net(), HAPPIERLoss(num_classes=4, embedding_dim=8))
    _trainer(fast_dev_run=1).fit(module, datamodule=_datamodule())
    path = tmp_path / "run.ckpt"
    module.trainer.save_checkpoint(path)
    other = RetrievalModule(_net(), HAPPIERLoss(num_classes=5, embedding_dim=8))
    message = r"`loss.cluster.proxies`: checkpoint \[4, 8\] vs configured model \[5, 8\].*data.train_dataset"
    with pytest.raises(ValueError, match=message):
        RetrievalModule.load_from_checkpoint(path, net=_net(), loss=HAPPIERLoss(num_classes=5, embedding_dim=8))
    with pytest.raises(ValueError, match=message):
        _trainer(max_epochs=2).fit(other, datamodule=_datamodule(), ckpt_path=path)


def test_objects_from_python_are_not_pickled_into_hparams() -> None:
    module = RetrievalModule(_net(), ROADMAPLoss(), memory=CrossBatchMemory(size=8), head_lr=0.1)
    assert set(module.hparams) == {"lr_scheduler_interval", "head_lr", "loss_lr", "gather", "decomposability_gap",
                                   "lr_scheduler", "metric", "multistage", "compile", "compile_loss",
                                   "channels_last"}
    assert module.hparams.head_lr == 0.1 and module.hparams.metric is None
