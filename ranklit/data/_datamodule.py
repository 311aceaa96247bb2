"""``RetrievalDataModule``: datasets and a batch sampler given as objects, training and evaluation loaders.

The parts are injected (Lightning's ``class_path``/``init_args`` way): the training, validation, test and gallery
datasets are dataset objects, and the batch sampler is a *factory* called with the training labels
(``batch_sampler(labels) -> Sampler[list[int]]``; from the CLI, ``class_path: ranklit.data.PKSampler`` with its
``init_args`` minus ``labels``). A new dataset or sampler is one class; the datamodule never names them.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import lightning as L
import torch
import torch.distributed as dist
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler
from typing_extensions import override

from ranklit.data import datasets
from ranklit.data.datasets.base import RetrievalDataset
from ranklit.data.images._crop_first import CropFirst, crop_first, normalise_on_device
from ranklit.data.images._device_decode import decode_encoded, device_decoder
from ranklit.data.images._encoded import EncodedImages, collate
from ranklit.data.images._unreadable import EVALUATION_STOP
from ranklit.data.images.transforms import IMAGENET_MEAN, IMAGENET_STD, test_transform, train_transform
from ranklit.data.samplers import _category, _pk, _uniform  # noqa: F401  (see _EVERY_DATASET)
from ranklit.errors import UserError

# A LightningCLI's parser knows a dataset or sampler class by its short name (`class_path: CUB200`,
# `--data.batch_sampler PKSampler`) and lists it in `--help` only once the class is imported, and `import ranklit.data`
# is lazy: this module, which every such parser reads, imports them all (the samplers above).
_EVERY_DATASET = [getattr(datasets, name) for name in datasets.__all__]

__all__ = ["BatchSamplerFactory", "RetrievalDataModule"]

BatchSamplerFactory = Callable[[Tensor], Sampler]
"""Builds the training batch sampler from the training labels, e.g. ``functools.partial(PKSampler, p=8, k=4)``."""


def _evaluation_shard(dataset: Dataset) -> Sampler | None:
    """Under DDP each rank embeds every ``world_size``-th sample of an evaluation set, in order; ``None`` otherwise.

    ``DistributedSampler`` without shuffling pads the last shards with repeated samples so every rank runs the same
    number of batches; :class:`ranklit.metrics.RetrievalMetrics` gathers the shards and drops the repeats by sample
    index. The trainer's ``use_distributed_sampler: false`` (needed by the training samplers) would otherwise leave
    every rank embedding the whole set.
    """
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return None
    return DistributedSampler(dataset, num_replicas=dist.get_world_size(), rank=dist.get_rank(), shuffle=False)


def _labels(dataset: Dataset) -> Tensor:
    labels = getattr(dataset, "labels", None)
    if not isinstance(labels, Tensor):
        raise TypeError(
            f"`data.train_dataset` ({type(dataset).__name__}) has no `labels` tensor: ranklit datasets expose "
            "`labels` [N] or [N, L] (column 0 finest), which the batch sampler and the proxy losses read."
        )
    return labels


class RetrievalDataModule(L.LightningDataModule):
    """Training, validation and test loaders for image retrieval, from dataset objects and a batch-sampler factory.

    **Training** batches come from ``batch_sampler(train_dataset.labels)``: :class:`ranklit.data.PKSampler` (P
    classes × K images), :class:`ranklit.data.HierarchicalSampler` (FastAP's "hard" batches) or
    :class:`ranklit.data.CategorySampler`. These are rank-aware, so the trainer runs with
    ``use_distributed_sampler: false`` (the ``ranklit`` command's default; set it in a ``Trainer`` of your own).
    **Evaluation** loaders are sequential and never drop a sample; under DDP each rank embeds its share of the set.
    With a ``gallery_dataset``, evaluation is query/gallery: the validation/test dataset holds the queries
    (dataloader 0) and the gallery the retrieval set (dataloader 1); ``predict`` embeds the test set and the gallery.
    **Transforms**: a dataset built without a ``transform`` gets ranklit's (RandomResizedCrop + flip for training,
    resize + centre crop for evaluation, ``mean``/``std`` normalisation); a dataset given with its own transform
    keeps it. With ``normalize_on_device`` (the default) ranklit's transforms stop at the ``uint8`` crop, and the
    scaling to ``[0, 1]`` and the normalisation run on the batch after its transfer to the device
    (:meth:`on_after_batch_transfer`, called by Lightning's loops; the values are the same): a quarter of the bytes
    to collate in the loader workers, to hand over and to copy to the GPU, as timm's prefetcher does. Iterating a
    loader without a ``Trainer``, call ``datamodule.on_after_batch_transfer(batch, 0)`` on each batch.
    **Decoding**: with ranklit's transforms, a JPEG of 1 megapixel or more is decoded at the largest reduction (1/2,
    1/4, 1/8) that keeps the crop drawn for it at least the output size, a smaller one at full size by torchvision
    (the crop is drawn from the file's header first, with the same random draws; the GPU docs page, "The data
    path"). With ``decode_on_device``, the loader workers draw the crops the same way but hand over the JPEG files'
    bytes, and the decoding, crop, resize and flip run on the device (:meth:`on_after_batch_transfer`; the GPU docs
    page, "Decoding on the device"). An image that cannot be decoded stops the run naming its
    path (after the fault-tolerance checkpoint), or with ``on_bad_image="skip"``, in the training set, is replaced by
    the next image of its class and named in a warning (``ranklit data check`` finds such files beforehand). An
    evaluation image (validation, test, gallery; what ``predict`` embeds) is never replaced: a copy of a class mate in
    its place would change the metric, or index another image under its path, so it stops the run whatever the
    setting.
    **Root**: under the ``ranklit`` CLI, ``data.root`` is copied into the ``root`` of every dataset, so one option
    points a config at the data (``--data.root DIR``); from Python, give each dataset its root.

    Args:
        train_dataset: the training set (a ranklit dataset: items ``{"image", "label", "index"}`` and ``labels``).
        val_dataset: validated during ``fit`` and by ``validate``; ``None`` = no validation.
        test_dataset: evaluated by ``test`` and embedded by ``predict``; ``None``: the validation set.
        gallery_dataset: retrieval set of query/gallery evaluation (In-Shop, DyML, Revisited Oxford/Paris).
        batch_sampler: builds the training batch sampler from the training labels.
        root: the data folder (used by the CLI; see above).
        eval_batch_size: batch size of the evaluation loaders.
        image_size: training crop (RandomResizedCrop) side.
        crop_scale: area range of the training crop, as a fraction of the image.
        hflip: flip half of the training crops horizontally (default); ``data.hflip: false`` for classes that a
            mirror image changes (arrows, text, mirrored products).
        resize_size, crop_size: evaluation resize then centre crop.
        mean, std: normalisation (ImageNet by default).
        num_workers: loader worker processes per process (one process per GPU under DDP: about the CPU cores per GPU
            minus one); they persist from epoch to epoch and from one validation to the next.
        pin_memory: page-locked batches (asynchronous copies to the GPU); ``None``: when training on CUDA.
        normalize_on_device: ranklit's transforms yield ``uint8`` images, scaled and normalised on the device by
            :meth:`on_after_batch_transfer` (see **Transforms**); ``False``: normalised ``float32`` images from the
            loader (e.g. for loops without a ``Trainer``).
        on_bad_image: ``"stop"`` or ``"skip"`` a training image that cannot be decoded (see **Decoding**).
        decode_on_device: ``False`` (the default): JPEGs decoded in the loader workers; ``"auto"``: on the device when
            the trainer runs on CUDA and a decoder there reads the probe JPEGs as Pillow does; ``True``: on the
            trainer's device whatever it is (the CPU too: slower than in the workers, for tests). Needs
            ``normalize_on_device`` and ranklit's transforms (a dataset's own transform decodes in the workers).

    Example:
        >>> from functools import partial
        >>> from ranklit.data import PKSampler, SyntheticHierarchy
        >>> small = dict(num_coarse=2, fine_per_parent=4, images_per_class=4, image_size=16)
        >>> dm = RetrievalDataModule(
        ...     SyntheticHierarchy(split="train", **small), SyntheticHierarchy(split="test", **small),
        ...     batch_sampler=partial(PKSampler, p=2, k=2), image_size=16, resize_size=16, crop_size=16)
        >>> dm.num_classes, next(iter(dm.train_dataloader()))["image"].shape
        (4, torch.Size([4, 3, 16, 16]))
    """

    def __init__(
        self,
        train_dataset: RetrievalDataset | None = None,
        val_dataset: RetrievalDataset | None = None,
        test_dataset: RetrievalDataset | None = None,
        gallery_dataset: RetrievalDataset | None = None,
        batch_sampler: BatchSamplerFactory | None = None,
        root: str | None = None,
        eval_batch_size: int = 128,
        image_size: int = 224,
        crop_scale: tuple[float, float] = (0.16, 1.0),
        hflip: bool = True,
        resize_size: int = 256,
        crop_size: int = 224,
        mean: tuple[float, float, float] = IMAGENET_MEAN,
        std: tuple[float, float, float] = IMAGENET_STD,
        num_workers: int = 0,
        on_bad_image: Literal["stop", "skip"] = "stop",
        pin_memory: bool | None = None,
        normalize_on_device: bool = True,
        decode_on_device: bool | Literal["auto"] = False,
    ) -> None:
        super().__init__()
        self.train_dataset, self.val_dataset = train_dataset, val_dataset
        self.test_dataset, self.gallery_dataset = test_dataset, gallery_dataset
        self.batch_sampler = batch_sampler
        self.root = None if root is None else Path(root)
        self.eval_batch_size, self.num_workers, self.pin_memory = eval_batch_size, num_workers, pin_memory
        self.mean, self.std = tuple(mean), tuple(std)
        self.resize_size, self.crop_size = resize_size, crop_size
        self.normalize_on_device = normalize_on_device
        train = train_transform(image_size, scale=crop_scale, mean=mean, std=std, hflip=hflip)
        evaluation = test_transform(resize_size, crop_size, mean=mean, std=std)
        if on_bad_image not in ("stop", "skip"):
            raise ValueError(f"`data.on_bad_image` must be 'stop' or 'skip', got {on_bad_image!r}.")
        if decode_on_device not in (False, True, "auto"):
            raise ValueError(f"`data.decode_on_device` must be false, true or 'auto', got {decode_on_device!r}.")
        if decode_on_device is True and not normalize_on_device:
            raise ValueError("`data.decode_on_device: true` needs `data.normalize_on_device: true` (the device "
                             "decodes to uint8 crops, normalised there): set one of them differently.")
        self.decode_on_device = decode_on_device if normalize_on_device else False
        parts = [(train_dataset, train), (val_dataset, evaluation), (test_dataset, evaluation)]
        for dataset, transform in [*parts, (gallery_dataset, evaluation)]:
            if dataset is None:
                continue
            if hasattr(dataset, "on_bad_image"):  # an evaluation image is never replaced: it would change the metric
                dataset.on_bad_image = on_bad_image if transform is train or on_bad_image == "stop" else EVALUATION_STOP
            if getattr(dataset, "transform", None) is None:
                # a file is decoded at the size its crop needs; uint8 crops normalised on the device
                dataset.transform = crop_first(transform, on_device=normalize_on_device)

    @override
    def state_dict(self) -> dict[str, Any]:
        """What every checkpoint records of the data: the evaluation ``preprocessing`` (``resize_size``,
        ``crop_size``, ``mean``, ``std``), so that ``ranklit test``/``validate``/``predict``/``export``/``index``
        evaluate the checkpoint's network on images prepared as in its training run, whatever config is given."""
        sizes = {"resize_size": int(self.resize_size), "crop_size": int(self.crop_size)}
        return {"preprocessing": {**sizes, "mean": [float(v) for v in self.mean], "std": [float(v) for v in self.std]}}

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Nothing to restore: the recorded preprocessing is read by the commands (:meth:`state_dict`)."""

    @override
    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        """Scale and normalise the ``uint8`` images of a batch on its device (``normalize_on_device``); a batch of
        float images (a dataset's own transform) is left as it is. Then the LightningModule's own
        ``on_after_batch_transfer``, if it has one (e.g. GPU augmentations): Lightning calls only the datamodule's
        when both define it, so this one calls the module's, which gets the normalised images it got before."""
        image = batch.get("image") if isinstance(batch, dict) else None
        encoded = batch.get("encoded") if isinstance(batch, dict) else None
        if isinstance(image, Tensor) and isinstance(encoded, EncodedImages):  # decoding on the device
            batch = {key: value for key, value in batch.items() if key != "encoded"}
            image = batch["image"] = decode_encoded(encoded, image)
        if isinstance(image, Tensor) and image.dtype == torch.uint8:
            batch = {**batch, "image": normalise_on_device(image, self.mean, self.std)}
        module = self.trainer.lightning_module if self.trainer is not None else None
        if module is not None and type(module).on_after_batch_transfer is not L.LightningModule.on_after_batch_transfer:
            batch = module.on_after_batch_transfer(batch, dataloader_idx)
        return batch

    def _require(self, name: str, purpose: str) -> Dataset:
        dataset = getattr(self, name)
        if dataset is None:
            raise ValueError(f"{purpose} needs `data.{name}`: give it in the config (class_path and init_args).")
        return dataset

    @property
    def num_classes(self) -> int:
        """Number of fine training classes (the number of proxies of proxy-based losses)."""
        labels = _labels(self._require("train_dataset", "Counting the training classes"))
        return int((labels if labels.ndim == 1 else labels[:, 0]).max()) + 1

    def _train_batch_sampler(self) -> Sampler:
        data = self._require("train_dataset", "Training")
        if self.batch_sampler is None:
            raise UserError(
                "Training needs `data.batch_sampler`, e.g. `class_path: ranklit.data.PKSampler` with `init_args: "
                "{p: 8, k: 4}` (8 classes x 4 images per batch)."
            )
        try:
            return self.batch_sampler(_labels(data))
        except (ValueError, TypeError) as error:
            raise UserError(f"`data.batch_sampler`: {error}") from error

    def check_batch_sampler(self) -> None:
        """Build the training batch sampler once and discard it (its warnings too; the training loader's own sampler
        repeats them), so that a bad setting stops a run before any work: the CLI calls it before the baseline
        validation. Under DDP the process group does not exist yet: the sampler is checked as on one process."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._train_batch_sampler()

    @override
    def train_dataloader(self) -> DataLoader:
        data = self._require("train_dataset", "Training")
        return DataLoader(
            data,
            batch_sampler=self._train_batch_sampler(),
            **self._loader_options(data),
        )

    def _trainers_device(self) -> torch.device:
        return self.trainer.strategy.root_device if self.trainer is not None else torch.device("cpu")

    def _loader_options(self, dataset: Dataset) -> dict[str, Any]:
        """Workers (persistent), pinned memory when asked or, by default, when training on a CUDA device, and the
        collation of encoded JPEGs where the device decodes them (:meth:`_decodes_on_device`)."""
        pin = self.pin_memory
        if pin is None:
            pin = self._trainers_device().type == "cuda"
        workers = self.num_workers
        options: dict[str, Any] = {"num_workers": workers, "persistent_workers": workers > 0, "pin_memory": pin}
        transform = getattr(dataset, "transform", None)
        if isinstance(transform, CropFirst) and transform.encodable:
            transform.encode = self._decodes_on_device()
            if transform.encode:
                options["collate_fn"] = collate
        return options

    def _decodes_on_device(self) -> bool:
        """``decode_on_device`` resolved for the trainer's device: ``"auto"`` on CUDA only, and only where a decoder
        there reads the probe JPEGs as Pillow does (``True`` without one warns and decodes in the workers)."""
        device = self._trainers_device()
        if self.decode_on_device is False or (self.decode_on_device == "auto" and device.type != "cuda"):
            return False
        if device_decoder(device) is None:
            if self.decode_on_device is True:
                warnings.warn(f"`data.decode_on_device`: no JPEG decoder on {device} decodes as Pillow does (none "
                              "installed, or it disagrees): the loader workers decode.", stacklevel=2)
            return False
        return True

    def _eval_loaders(self, name: str, purpose: str) -> DataLoader | list[DataLoader]:
        if name == "test_dataset" and self.test_dataset is None and self.val_dataset is not None:
            name = "val_dataset"
        loaders = [self._eval_loader(self._require(name, purpose))]
        if self.gallery_dataset is not None:
            loaders.append(self._eval_loader(self.gallery_dataset))
        return loaders[0] if len(loaders) == 1 else loaders

    def _eval_loader(self, dataset: Dataset) -> DataLoader:
        return DataLoader(
            dataset,
            batch_size=self.eval_batch_size,
            sampler=_evaluation_shard(dataset),
            shuffle=False,
            drop_last=False,
            **self._loader_options(dataset),
        )

    @override
    def val_dataloader(self) -> DataLoader | list[DataLoader]:
        if self.val_dataset is None:
            return []
        return self._eval_loaders("val_dataset", "Validation")

    @override
    def test_dataloader(self) -> DataLoader | list[DataLoader]:
        return self._eval_loaders("test_dataset", "Testing")

    @override
    def predict_dataloader(self) -> DataLoader | list[DataLoader]:
        return self._eval_loaders("test_dataset", "Prediction")

