"""``RetrievalDataModule``: any ranklit dataset, P×K or hierarchical training batches, sequential evaluation loaders."""

from __future__ import annotations

import inspect
from typing import Any, Literal

import lightning as L
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler
from typing_extensions import override

from ranklit.data import datasets as dataset_zoo
from ranklit.data.category_sampler import CategorySampler
from ranklit.data.samplers import HierarchicalSampler, PKSampler
from ranklit.data.transforms import IMAGENET_MEAN, IMAGENET_STD, test_transform, train_transform

__all__ = ["RetrievalDataModule"]


def _dataset_class(name: str) -> type[Dataset]:
    available = sorted(n for n in getattr(dataset_zoo, "__all__", []) if n[0].isupper())
    cls = getattr(dataset_zoo, name, None)
    if not (inspect.isclass(cls) and issubclass(cls, Dataset)):
        raise ValueError(f"Unknown dataset {name!r}. Available datasets: {', '.join(available)}.")
    return cls


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


class RetrievalDataModule(L.LightningDataModule):
    """Training, validation and test loaders for image retrieval.

    Training batches are ``batch_size = P × samples_per_class`` images drawn by :class:`ranklit.data.PKSampler`
    (``sampler: pk``) or, for FastAP's category-based "hard" batches, :class:`ranklit.data.HierarchicalSampler`
    (``sampler: hierarchical``: two super-classes per batch, ``batches_per_super_pair`` batches per pair), or, for
    FastAP's VehicleID batches, :class:`ranklit.data.CategorySampler` (``sampler: category``: half a batch from one
    labelled category, half from classes without one). All are rank-aware, so the trainer must run with
    ``use_distributed_sampler: false`` (the configs set it).
    Evaluation loaders are sequential and never drop a sample; under DDP each rank embeds its share of the set.
    With ``gallery_split`` set, evaluation is query/gallery: the ``val_split``/``test_split`` dataset holds the
    queries (dataloader 0) and the gallery split dataset the retrieval set (dataloader 1).

    Args:
        dataset: name of a class of :mod:`ranklit.data.datasets` (``SyntheticHierarchy``, ``CUB200``,
            ``StanfordOnlineProducts``, ``INaturalist2018``, ``InShop``, ``VehicleID``, ``DyML``, ``CSVDataset``, ...).
        root: the dataset's directory (its official layout; see the dataset class).
        dataset_options: further keyword arguments of the dataset class (e.g. ``{"levels": "full"}``).
        train_split, val_split, test_split: split names passed to the dataset; ``val_split: null`` disables validation.
        gallery_split: split of the retrieval set for query/gallery evaluation (In-Shop: ``gallery``).
        batch_size: training batch size, a multiple of ``samples_per_class``.
        samples_per_class: ``K`` of the P×K batches.
        sampler: ``pk``, ``hierarchical`` or ``category``.
        batches_per_super_pair: batches per pair of super-classes per epoch (hierarchical sampler).
        small_classes: classes with fewer than ``K`` images are drawn with ``replace``-ment or ``skip``-ped.
        batches_per_epoch: P×K batches per epoch (``None``: one pass over the classes, each class once); more
            batches make further passes, each with a fresh permutation.
        eval_batch_size: batch size of the evaluation loaders.
        image_size: training crop (RandomResizedCrop) side.
        crop_scale: area range of the training crop, as a fraction of the image.
        resize_size, crop_size: evaluation resize then centre crop.
        mean, std: normalisation (ImageNet by default).
        num_workers: loader worker processes.
        seed: seed of the samplers (``seed + epoch`` each epoch).
    """

    def __init__(
        self,
        dataset: str = "SyntheticHierarchy",
        root: str | None = None,
        dataset_options: dict[str, Any] | None = None,
        train_split: str = "train",
        val_split: str | None = "test",
        test_split: str = "test",
        gallery_split: str | None = None,
        batch_size: int = 32,
        samples_per_class: int = 4,
        sampler: Literal["pk", "hierarchical", "category"] = "pk",
        batches_per_super_pair: int = 5,
        small_classes: Literal["replace", "skip"] = "replace",
        batches_per_epoch: int | None = None,
        eval_batch_size: int = 128,
        image_size: int = 224,
        crop_scale: tuple[float, float] = (0.16, 1.0),
        resize_size: int = 256,
        crop_size: int = 224,
        mean: tuple[float, float, float] = IMAGENET_MEAN,
        std: tuple[float, float, float] = IMAGENET_STD,
        num_workers: int = 0,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if batch_size % samples_per_class:
            raise ValueError(
                f"`batch_size` ({batch_size}) must be a multiple of `samples_per_class` ({samples_per_class}): "
                "batches hold P classes × K images."
            )
        if batches_per_epoch is not None and sampler != "pk":
            raise ValueError(
                f"`batches_per_epoch` sets the epoch length of the P×K sampler; the {sampler!r} sampler derives its "
                "own (`batches_per_super_pair` for `hierarchical`, the categories' sizes for `category`). Remove it."
            )
        self.dataset_class = _dataset_class(dataset)
        self.save_hyperparameters()
        self._datasets: dict[str, Dataset] = {}

    def _dataset(self, split: str, train: bool) -> Dataset:
        key = f"{split}/{'train' if train else 'eval'}"
        if key not in self._datasets:
            hp = self.hparams
            if train:
                transform = train_transform(hp.image_size, scale=hp.crop_scale, mean=hp.mean, std=hp.std)
            else:
                transform = test_transform(hp.resize_size, hp.crop_size, mean=hp.mean, std=hp.std)
            options = dict(hp.dataset_options or {})
            try:
                self._datasets[key] = self.dataset_class(hp.root, split=split, transform=transform, **options)
            except TypeError as error:
                raise TypeError(f"Invalid `data.dataset_options` for {hp.dataset}: {error}") from error
        return self._datasets[key]

    @property
    def num_classes(self) -> int:
        """Number of fine training classes (the number of proxies of proxy-based losses)."""
        labels = self._dataset(self.hparams.train_split, train=True).labels
        return int((labels if labels.ndim == 1 else labels[:, 0]).max()) + 1

    @override
    def setup(self, stage: str) -> None:
        hp = self.hparams
        if stage == "fit":
            self._dataset(hp.train_split, train=True)
        if stage in ("fit", "validate") and hp.val_split is not None:
            self._dataset(hp.val_split, train=False)
        if stage == "test":
            self._dataset(hp.test_split, train=False)
        if stage in ("validate", "test", "predict") or (stage == "fit" and hp.val_split is not None):
            if hp.gallery_split is not None:
                self._dataset(hp.gallery_split, train=False)

    def _batch_sampler(self, labels: Any) -> PKSampler | HierarchicalSampler | CategorySampler:
        hp = self.hparams
        p = hp.batch_size // hp.samples_per_class
        if hp.sampler == "pk":
            return PKSampler(
                labels,
                p,
                hp.samples_per_class,
                seed=hp.seed,
                small_classes=hp.small_classes,
                batches_per_epoch=hp.batches_per_epoch,
            )
        if hp.sampler == "category":
            return CategorySampler(labels, p, hp.samples_per_class, seed=hp.seed, small_classes=hp.small_classes)
        return HierarchicalSampler(
            labels,
            p,
            hp.samples_per_class,
            batches_per_super_pair=hp.batches_per_super_pair,
            seed=hp.seed,
            small_classes=hp.small_classes,
        )

    @override
    def train_dataloader(self) -> DataLoader:
        data = self._dataset(self.hparams.train_split, train=True)
        return DataLoader(
            data,
            batch_sampler=self._batch_sampler(data.labels),
            num_workers=self.hparams.num_workers,
            persistent_workers=self.hparams.num_workers > 0,
        )

    def _eval_loaders(self, split: str) -> DataLoader | list[DataLoader]:
        loaders = [self._eval_loader(split)]
        if self.hparams.gallery_split is not None:
            loaders.append(self._eval_loader(self.hparams.gallery_split))
        return loaders[0] if len(loaders) == 1 else loaders

    def _eval_loader(self, split: str) -> DataLoader:
        dataset = self._dataset(split, train=False)
        return DataLoader(
            dataset,
            batch_size=self.hparams.eval_batch_size,
            sampler=_evaluation_shard(dataset),
            shuffle=False,
            drop_last=False,
            num_workers=self.hparams.num_workers,
        )

    @override
    def val_dataloader(self) -> DataLoader | list[DataLoader]:
        if self.hparams.val_split is None:
            return []
        return self._eval_loaders(self.hparams.val_split)

    @override
    def test_dataloader(self) -> DataLoader | list[DataLoader]:
        return self._eval_loaders(self.hparams.test_split)

    @override
    def predict_dataloader(self) -> DataLoader | list[DataLoader]:
        return self._eval_loaders(self.hparams.test_split)
