"""``RetrievalModule``: the LightningModule that trains an embedding network with a ranking loss."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, Literal, cast

import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import Tensor, nn
from torch.optim import Optimizer
from typing_extensions import override

from ranklit._checks import check_flag
from ranklit._compat.lightning import attached_trainer
from ranklit.losses.base import EmbeddingLoss
from ranklit.metrics import DecomposabilityGap, RetrievalMetrics, RevisitedMetrics
from ranklit.models._backbones import EmbeddingNet
from ranklit.models._compile import compile_in_place, compile_options
from ranklit.models._divergence import divergence
from ranklit.models._kernel_checks import check_run_kernels
from ranklit.models._safe_loading import SafeLoading
from ranklit.training import (
    CrossBatchMemory,
    MultistageBackprop,
    manual_optimization_step,
    multistage_backward,
    prepare_ddp,
    ranking_objective,
    step_lr_schedulers,
)

__all__ = ["RetrievalModule"]

_PARTS = ("net", "loss", "optimizer", "lr_scheduler", "metric", "memory", "multistage")
_EVALUATION_ONLY = ["landmarks", "eval_scales"]  # not saved: a test config's values apply to any checkpoint


def _is_config(value: Any) -> bool:
    """Whether ``value`` is plain configuration (what the ``ranklit`` CLI records for an injected part)."""
    if isinstance(value, dict):
        return all(_is_config(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(_is_config(v) for v in value)
    return value is None or isinstance(value, (str, int, float, bool))


def _checkpoint_shape_errors(module: nn.Module, state_dict: dict[str, Any]) -> list[str]:
    """``name: checkpoint [a, b] vs model [c, d]`` for every tensor whose shape differs between the two."""
    own = module.state_dict()
    return [
        f"`{name}`: checkpoint {list(value.shape)} vs configured model {list(own[name].shape)}"
        for name, value in state_dict.items()
        if name in own and isinstance(value, Tensor) and value.shape != own[name].shape
    ]


class RetrievalModule(SafeLoading):
    """Embedding network + ranking loss + retrieval metrics.

    Training: each batch ``{"image", "label", "index"}`` is embedded and the loss ranks every query against the
    batch without itself (excluded by sample index). Under DDP with ``gather=True`` (default) every rank ranks its
    queries against the embeddings of all ranks, gathered with gradients by ranklit's own
    :func:`ranklit.training.gather_with_grad` (its backward returns to each rank the gradient that every rank's loss
    sends to its rows), the query excluded by its global sample index: the gradient equals that of one process with
    the global batch ([spec §3][spec-training]). With a ``memory`` the queries are also ranked against past batches
    (XBM). With ``multistage`` a batch of any size is trained with the exact full-batch gradient, ``chunk_size``
    images at a time (:mod:`ranklit.training._multistage`). The loss is computed in float32 with autocast off, so
    ``--trainer.precision bf16-mixed`` only affects the network. See :func:`ranklit.training.ranking_objective`.

    **Multistage mode** uses Lightning's manual optimisation (one optimiser step per batch): Lightning rejects
    ``trainer.gradient_clip_val`` and ``accumulate_grad_batches`` there, so clip with
    ``MultistageBackprop(gradient_clip_val=...)`` (global norm); schedulers are stepped at their
    ``interval``/``frequency`` as in automatic mode; under DDP gradients are averaged once per batch
    (:mod:`ranklit.training._manual`).

    **Proxy losses** (:class:`ranklit.losses.ClusterLoss`, HAPPIER, CSL, NormSoftmax, ProxyNCA++) built without
    ``num_classes``/``embedding_dim`` get them in :meth:`setup`: the number of fine classes of the datamodule's
    training set and the network's ``embedding_dim``. A checkpoint whose tensors do not fit the configured model is
    refused before anything runs, naming each tensor and both shapes.

    **Evaluation**: validation and test feed copies of ``metric`` (default :class:`ranklit.metrics.RetrievalMetrics`
    with its defaults) and log ``val/<key>`` / ``test/<key>`` (mAP, mAP@R, P@1, R@k; with hierarchical labels also
    H-AP, ASI, NDCG and per-level metrics). With a gallery dataloader (index 1) evaluation is query/gallery. A
    non-finite training loss stops the run with a message naming the step.

    **Hyper-parameters**: plain options are saved in ``hparams``; the injected parts are saved only as the
    configuration the ``ranklit`` CLI gives (so ``RetrievalModule.load_from_checkpoint(path)`` rebuilds a CLI run);
    objects passed from Python are not pickled into checkpoints: pass them again,
    ``RetrievalModule.load_from_checkpoint(path, net=..., loss=...)``, which loads the file weights-only
    (:mod:`ranklit.models._safe_loading`: a checkpoint that names code to run is refused, nothing of it runs).

    Args:
        net: the embedding network (:class:`ranklit.models.EmbeddingNet`, or any module with L2-normalised output,
            ``embedding_dim`` and optionally ``head_parameters()``).
        loss: any ranklit loss, called as ``loss(embeddings, labels, *, ref_embeddings, ref_labels, ids, ref_ids)``.
        optimizer: optimizer factory called with the parameter groups ``backbone``, ``head`` and ``loss``.
        lr_scheduler: optional scheduler factory.
        lr_scheduler_interval: step the scheduler after every ``"epoch"`` or after every optimiser ``"step"``.
        head_lr: learning rate of the head (pooling, LayerNorm, linear layer); ``None`` = the optimizer's.
        loss_lr: learning rate of the loss's own parameters (proxies); ``None`` = the optimizer's.
        metric: the evaluation metric (e.g. ``RetrievalMetrics(recall_at=(1, 10, 100), compute_on_cpu=True)``);
            validation and test use copies of it.
        gather: under DDP, rank against the retrieval set gathered from all ranks.
        memory: a :class:`ranklit.training.CrossBatchMemory` (size, start step, weight), or ``None``.
        multistage: a :class:`ranklit.training.MultistageBackprop` (chunk size, clipping), or ``None`` (plain
            backprop of the whole batch).
        landmarks: test on Revisited Oxford/Paris instead of ``metric``: a :class:`ranklit.metrics.RevisitedMetrics`
            (post-processing, mP@k) over a :class:`ranklit.landmarks.RevisitedTestSet`; logs
            ``test/<name>/<protocol>/map`` and ``.../mp_at_<k>``. Not saved in checkpoints, like ``eval_scales``: a
            test config sets them for any trained model.
        eval_scales: image scales of the evaluation descriptors (validation, test, predict): one scale embeds the
            image as it is; several embed it resized by each factor (bilinear) and average the L2-normalised
            descriptors, then re-normalise (multi-scale descriptors, e.g. ``[1.0, 0.7071, 0.5]``).
        decomposability_gap: log ``train/batch_map``, ``train/map`` and ``train/decomposability_gap`` every epoch
            (:class:`ranklit.metrics.DecomposabilityGap`: the batch AP of what the loss ranks against the AP over
            the epoch's samples, under ``metric``'s tie policy); stores the epoch's embeddings.
        compile: ``torch.compile`` the network: ``false``, ``true`` or a dict of options.
        compile_loss: compile the loss too (its input checks break the graph).
        channels_last: channels-last images and weights (for GPU convolutions).
    """

    def __init__(
        self,
        net: EmbeddingNet,
        loss: EmbeddingLoss,
        optimizer: OptimizerCallable = torch.optim.Adam,
        lr_scheduler: LRSchedulerCallable | None = None,
        lr_scheduler_interval: Literal["epoch", "step"] = "epoch",
        head_lr: float | None = None,
        loss_lr: float | None = None,
        metric: RetrievalMetrics | None = None,
        gather: bool = True,
        memory: CrossBatchMemory | None = None,
        multistage: MultistageBackprop | None = None,
        decomposability_gap: bool = False,
        landmarks: RevisitedMetrics | None = None,
        eval_scales: Sequence[float] = (1.0,),
        compile: bool | dict[str, Any] = False,
        compile_loss: bool = False,
        channels_last: bool = False,
    ) -> None:
        super().__init__()
        if lr_scheduler_interval not in ("epoch", "step"):
            raise ValueError(f"`lr_scheduler_interval` must be 'epoch' or 'step', got {lr_scheduler_interval!r}.")
        with warnings.catch_warnings():  # objects given from Python are dropped just below
            warnings.filterwarnings("ignore", message=r"Attribute '\w+' is an instance of `nn.Module`")
            self.save_hyperparameters(ignore=_EVALUATION_ONLY)
        for name in (*_PARTS, "compile"):  # a compile backend given as a callable is not configuration either
            if not _is_config(self.hparams.get(name)):
                del self.hparams[name]
        self.net = net
        self.loss = loss
        self.memory = memory
        self.multistage = multistage
        self.optimizer_factory = optimizer
        self.scheduler_factory = lr_scheduler
        self.lr_scheduler_interval = lr_scheduler_interval
        self.head_lr, self.loss_lr, self.gather = head_lr, loss_lr, gather
        self.automatic_optimization = multistage is None
        metric = RetrievalMetrics() if metric is None else metric
        self.val_metrics = cast(RetrievalMetrics, metric.clone())  # a deep copy: the same class
        self.test_metrics = cast(RetrievalMetrics, metric.clone())
        self.train_gap = DecomposabilityGap(ties=self.val_metrics.ties) if decomposability_gap else None  # one policy
        self.landmarks = landmarks
        if not eval_scales or any(not isinstance(s, (int, float)) or s <= 0 for s in eval_scales):
            raise ValueError(f"`eval_scales` must list positive image scales (e.g. [1.0] or [1.0, 0.707, 0.5]), got "
                             f"{eval_scales!r}.")
        self.eval_scales = tuple(float(s) for s in eval_scales)
        self.channels_last = check_flag("channels_last", channels_last)
        options = compile_options(compile)
        compile_in_place(self.net, options)
        compile_in_place(self.loss, options if check_flag("compile_loss", compile_loss) else None)
        if self.channels_last:
            self.net.to(memory_format=torch.channels_last)

    @override
    def setup(self, stage: str) -> None:
        sized: list[Any] = [m for m in self.loss.modules() if hasattr(m, "setup_classes")]  # proxy losses
        datamodule = getattr(self.trainer, "datamodule", None) if attached_trainer(self) is not None else None
        if stage != "fit" or not sized or datamodule is None or not hasattr(datamodule, "num_classes"):
            return
        for module in sized:
            module.setup_classes(int(datamodule.num_classes), int(self.net.embedding_dim))

    @override
    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        state = checkpoint.get("state_dict", {})
        for name, module in self.loss.named_modules(prefix="loss"):
            proxies = state.get(f"{name}.proxies")
            if hasattr(module, "setup_classes") and isinstance(proxies, Tensor):
                module.setup_classes(*proxies.shape)  # sizes of a loss built without them, from the checkpoint
        if errors := _checkpoint_shape_errors(self, state):
            raise ValueError(
                "The checkpoint does not fit the configured model: " + "; ".join(errors) + ". Proxies are "
                "[classes, dimension]: the classes come from `data.train_dataset`, the dimension from "
                "`model.net.init_args.embedding_dim` (or the loss's own `num_classes`/`embedding_dim`); the network's "
                "shapes from `model.net.init_args` (backbone, embedding_dim, layer_norm). Use the config of the run "
                "that wrote the checkpoint."
            )

    @override
    def forward(self, images: Tensor) -> Tensor:
        return self.net(images)

    def _objective(self, embeddings: Tensor, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        labels, ids = batch["label"], batch["index"]
        if not torch.isfinite(embeddings.detach()).all():  # before the loss: its input check names no precision
            raise FloatingPointError(self._divergence("The network's embeddings hold NaN or infinite values", batch,
                                                      batch_idx))
        objective = ranking_objective(
            self.loss, embeddings, labels, ids, gather=self.gather, memory=self.memory, step=self.global_step
        )
        loss = objective.loss
        if not torch.isfinite(loss):
            what = f"The training loss ({type(self.loss).__name__}) is {loss.item()}"
            raise FloatingPointError(self._divergence(what, batch, batch_idx))
        if self.train_gap is not None:
            refs = objective.ref_embeddings.detach(), objective.ref_labels, objective.ref_ids
            self.train_gap.update(embeddings, labels, ids, ref_embeddings=refs[0], ref_labels=refs[1], ref_ids=refs[2])
        return loss

    def _divergence(self, what: str, batch: dict[str, Tensor], batch_idx: int) -> str:
        """:func:`ranklit.models._divergence.divergence` with this run's step, precision, device and image size."""
        trainer = attached_trainer(self)
        precision = str(trainer.precision) if trainer is not None else "32-true"
        images = batch.get("image")
        size = tuple(images.shape[-2:]) if isinstance(images, Tensor) and images.ndim == 4 else None
        where = f"at global step {self.global_step} (epoch {self.current_epoch}, batch {batch_idx})"
        return divergence(what, where, precision, self.device.type, size)  # type: ignore[arg-type]

    def _layout(self, images: Tensor) -> Tensor:
        """``images`` in the network's memory layout (channels-last with ``channels_last``; a copy on the device)."""
        return images.contiguous(memory_format=torch.channels_last) if self.channels_last else images

    @override
    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        images = self._layout(batch["image"])
        if self.multistage is None:
            loss = self._objective(self.net(images), batch, batch_idx)
        else:
            loss = manual_optimization_step(self, lambda: self._multistage(images, batch, batch_idx), batch_idx)
        self.log("train/loss", loss, prog_bar=True, batch_size=images.shape[0])
        return loss

    def _multistage(self, images: Tensor, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        assert self.multistage is not None  # only called in multistage mode
        loss, _ = multistage_backward(
            self.net,
            images,
            lambda embeddings: self._objective(embeddings, batch, batch_idx),
            self.multistage.chunk_size,
            backward=self.manual_backward,
        )
        return loss
    @override
    def on_before_optimizer_step(self, optimizer: Optimizer) -> None:
        # multistage (manual optimisation): clip here, after a 16-mixed gradient scaler has unscaled the gradients
        if self.multistage is not None and self.multistage.gradient_clip_val is not None:
            self.clip_gradients(optimizer, gradient_clip_val=self.multistage.gradient_clip_val,
                                gradient_clip_algorithm="norm")

    @override
    def on_fit_start(self) -> None:  # the kernels' self-checks before the first step (and the first validation)
        floating = [p.dtype for p in self.net.parameters() if p.is_floating_point()]
        dtype = torch.float64 if torch.float64 in floating else torch.float32
        check_run_kernels(self.loss, self.device, dtype)

    @override
    def on_train_start(self) -> None:
        if not self.automatic_optimization:
            prepare_ddp(self.trainer)

    @override
    def on_train_epoch_end(self) -> None:
        if not self.automatic_optimization:
            step_lr_schedulers(self, "epoch")
        if self.train_gap is not None:
            gap = self.train_gap.compute()
            self.train_gap.reset()
            for key, name in (("batch_map", "batch_map"), ("map", "map"), ("gap", "decomposability_gap")):
                self.log(f"train/{name}", gap[key], sync_dist=True)  # equal on every rank: the mean changes nothing

    def embed(self, images: Tensor) -> Tensor:
        """Evaluation descriptors: the network's at each of ``eval_scales``, averaged and L2-normalised."""
        images = self._layout(images)
        if self.eval_scales == (1.0,):
            return self.net(images)
        total = sum(
            self.net(images if scale == 1.0 else nn.functional.interpolate(
                images, scale_factor=scale, mode="bilinear", align_corners=False, antialias=True))
            for scale in self.eval_scales
        )
        return nn.functional.normalize(cast(Tensor, total), dim=1)

    def _update(self, metrics: RetrievalMetrics, batch: dict[str, Tensor], dataloader_idx: int) -> None:
        metrics.update(self.embed(batch["image"]), batch["label"], batch["index"], gallery=dataloader_idx == 1)

    def _log_metrics(self, metrics: RetrievalMetrics, prefix: str) -> None:
        results = metrics.compute()
        metrics.reset()
        # computed from the gathered states, so equal on every rank; sync_dist only silences Lightning's warning
        shown = {f"{prefix}/{key}": value for key, value in results.items() if key in ("map_at_r", "hap")}
        self.log_dict(shown, prog_bar=True, sync_dist=True)
        self.log_dict({f"{prefix}/{k}": v for k, v in results.items() if f"{prefix}/{k}" not in shown}, sync_dist=True)

    @override
    def validation_step(self, batch: dict[str, Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        self._update(self.val_metrics, batch, dataloader_idx)

    @override
    def on_validation_epoch_end(self) -> None:
        self._log_metrics(self.val_metrics, "val")

    @override
    def on_test_start(self) -> None:
        if self.landmarks is not None:
            loaders = self.trainer.test_dataloaders
            self.landmarks.bind((loaders[0] if isinstance(loaders, (list, tuple)) else loaders).dataset)  # type: ignore[union-attr]

    @override
    def test_step(self, batch: dict[str, Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        if self.landmarks is None:
            self._update(self.test_metrics, batch, dataloader_idx)
        else:
            self.landmarks.update(self.embed(batch["image"]), batch["index"])

    @override
    def on_test_epoch_end(self) -> None:
        if self.landmarks is None:
            self._log_metrics(self.test_metrics, "test")
            return
        results = self.landmarks.compute()
        self.landmarks.reset()
        self.log_dict({f"test/{key}": value for key, value in results.items()}, sync_dist=True)

    @override
    def predict_step(self, batch: dict[str, Tensor], batch_idx: int, dataloader_idx: int = 0) -> dict[str, Tensor]:
        return {"embeddings": self.embed(batch["image"]), "labels": batch["label"], "index": batch["index"]}

    def _parameter_groups(self) -> list[dict[str, Any]]:
        head = list(self.net.head_parameters()) if hasattr(self.net, "head_parameters") else []
        head_ids = {id(p) for p in head}
        backbone = [p for p in self.net.parameters() if id(p) not in head_ids]
        groups: list[dict[str, Any]] = [
            {"name": "backbone", "params": backbone},
            {"name": "head", "params": head, "lr": self.head_lr},
            {"name": "loss", "params": list(self.loss.parameters()), "lr": self.loss_lr},
        ]
        groups = [{k: v for k, v in g.items() if v is not None} for g in groups]
        return [g for g in groups if any(p.requires_grad for p in g["params"])]

    @override
    def configure_optimizers(self) -> Any:
        optimizer = self.optimizer_factory(self._parameter_groups())
        if self.scheduler_factory is None:
            return optimizer
        scheduler = {"scheduler": self.scheduler_factory(optimizer), "interval": self.lr_scheduler_interval}
        return {"optimizer": optimizer, "lr_scheduler": scheduler}
