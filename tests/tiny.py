"""Tiny synthetic set-ups shared by the tests: a ``RetrievalDataModule`` in Python and the same through the CLI."""

from __future__ import annotations

from functools import partial
from typing import Any

from ranklit.data import PKSampler, RetrievalDataModule, SyntheticHierarchy

SMALL = {"levels": 2, "num_coarse": 2, "fine_per_parent": 4, "images_per_class": 4, "image_size": 32}


def tiny_datamodule(
    options: dict[str, Any] | None = None, *, p: int = 4, k: int = 4, size: int = 32, **kwargs: Any
) -> RetrievalDataModule:
    """Synthetic train/test sets (``options`` of :class:`SyntheticHierarchy`), P×K batches, ``size``-pixel images."""
    options = {**SMALL, "image_size": size, **(options or {})}
    kwargs = {"image_size": size, "resize_size": size, "crop_size": size, **kwargs}
    return RetrievalDataModule(
        SyntheticHierarchy(split="train", **options),
        SyntheticHierarchy(split="test", **options),
        batch_sampler=partial(PKSampler, p=p, k=k),
        **kwargs,
    )


def synthetic_args(**options: Any) -> list[str]:
    """CLI overrides giving both synthetic datasets of a quick-start config the ``options`` (default: ``SMALL``)."""
    options = {**SMALL, **options}
    return [
        f"--data.{d}.init_args.{key}={value}"
        for d in ("train_dataset", "val_dataset")
        for key, value in options.items()
    ]
