"""Shared machinery of the dataset readers: layout checks with helpful errors, image decoding, relabelling, items.

Every reader subclasses :class:`ImageRetrievalDataset`, which holds ``paths`` and a ``labels`` tensor (``[N]`` or
``[N, L]``, column 0 finest, contiguous ids ``0..C-1`` per column, the original ids kept in ``class_names``) and
returns items ``{"image": transform(image), "label": labels[i], "index": i}``. A missing file raises
``FileNotFoundError`` and a malformed one ``ValueError``; both name the file, the expected layout and where the
dataset is obtained. Images are decoded by :func:`ranklit.data.images.decoding.load_image`; a transform with a
``from_file(path)`` method (ranklit's own, set by ``RetrievalDataModule``) is given the file instead and decodes it at
the size its crop needs, unless a subclass overrides :meth:`~ImageRetrievalDataset.read_image`. An image that fails
to decode raises ``ValueError`` naming its path, or, with ``on_bad_image = "skip"`` (``data.on_bad_image``), is
replaced by the next image of its class and named in a warning.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import torch
from PIL import Image
from torch import Tensor
from torch.utils.data import Dataset

from ranklit.data.datasets.validation import Problems, check_samples, warn_about_classes
from ranklit.data.images._unreadable import EVALUATION_STOP, NO_SKIP, evaluation_image, outside_a_run
from ranklit.data.images.decoding import IMAGE_EXTENSIONS, load_image
from ranklit.errors import UserError

__all__ = [
    "ImageRetrievalDataset",
    "RetrievalDataset",
    "IMAGE_EXTENSIONS",
    "contiguous_labels",
    "load_image",
    "retrieval_item",
    "split_pool",
]

_T = TypeVar("_T")


def contiguous_labels(rows: Sequence[Sequence[Hashable]]) -> tuple[Tensor, list[list[Hashable]]]:
    """Map each label column to contiguous ids ``0..C-1`` (in sorted order of the original values).

    Args:
        rows: ``N`` rows of ``L`` hashable, mutually comparable labels (ints or strings), column 0 finest.

    Returns:
        ``(labels, class_names)``: a long tensor ``[N, L]`` and, per column, the original value of each id
        (``class_names[c][labels[i, c]] == rows[i][c]``).

    Example:
        >>> labels, names = contiguous_labels([("b", 7), ("a", 7), ("b", 7)])
        >>> labels.tolist(), names
        ([[1, 0], [0, 0], [1, 0]], [['a', 'b'], [7]])
    """
    if not rows:
        return torch.zeros(0, 1, dtype=torch.long), [[]]
    columns = list(zip(*rows, strict=True))
    names = [sorted(set(column)) for column in columns]
    ids = [{value: i for i, value in enumerate(column_names)} for column_names in names]
    labels = torch.tensor([[ids[c][value] for c, value in enumerate(row)] for row in rows], dtype=torch.long)
    return labels.reshape(len(rows), len(columns)), names


def split_pool(split: str) -> tuple[str, ...]:
    """The splits relabelled together with ``split``: query and gallery share ids, any other split stands alone."""
    return ("query", "gallery") if split in ("query", "gallery") else (split,)


def retrieval_item(image: Any, label: Tensor, index: int, transform: Callable[[Any], Any] | None) -> dict[str, Any]:
    """The item every ranklit dataset returns: ``{"image": transform(image), "label": label, "index": index}``.

    An ``index`` with an ``augmentation_seed`` (what the ranklit batch samplers yield, see
    :class:`ranklit.data.samplers.base.SeededIndex`) runs the transform under that seed, with the global torch and
    Python random states saved and restored around it: the same augmentation in every worker, process and resumed run.
    """
    seed: int | None = getattr(index, "augmentation_seed", None)
    if transform is not None and seed is None:
        image = transform(image)
    elif transform is not None and seed is not None:
        python_state = random.getstate()
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(seed)  # the CPU generator only: torch.manual_seed would queue
            # a lazy seeding call with its stack trace for every CUDA/XPU/MTIA backend, at every item
            random.seed(seed)
            try:
                image = transform(image)
            finally:
                random.setstate(python_state)
    return {"image": image, "label": label, "index": int(index)}


class RetrievalDataset(Dataset):
    """What every ranklit dataset is: items ``{"image", "label", "index"}``, a ``labels`` tensor ``[N]`` or ``[N, L]``
    (column 0 finest) and a settable ``transform``. The datamodule, the samplers and the proxy losses rely on it;
    the ``ranklit`` CLI accepts its subclasses as ``data.*_dataset``."""

    labels: Tensor
    transform: Callable[[Any], Any] | None


class ImageRetrievalDataset(RetrievalDataset):
    """Base class of the on-disk readers: images listed in ``paths`` with a ``labels`` tensor.

    Subclasses set ``SPLITS`` (accepted ``split`` values; empty: any), ``LAYOUT`` (the expected files, for error
    messages) and ``SOURCE`` (where the dataset is obtained), read their lists with :meth:`required_path` and
    :meth:`malformed_line` and call :meth:`set_samples`; :meth:`read_image` decodes one image (override it for another
    storage).

    Attributes:
        root: the dataset folder.
        split: the split read.
        paths: image files, in item order.
        labels: ``[N]`` (one level) or ``[N, L]`` long tensor, column 0 finest, contiguous ids per column.
        class_names: per column, the original label of each contiguous id.
        num_classes: number of distinct finest labels.
    """

    SPLITS: ClassVar[tuple[str, ...]] = ()
    LAYOUT: ClassVar[str] = ""
    SOURCE: ClassVar[str] = ""
    on_bad_image: str = "stop"  # "skip": an undecodable image is replaced by the next image of its class
    # (EVALUATION_STOP: an evaluation set of a run that asked for "skip", which stops and says why it does)

    def __init__(self, root: str | Path, split: str | None, transform: Callable[[Any], Any] | None) -> None:
        if self.SPLITS and split not in self.SPLITS:
            raise ValueError(f"{type(self).__name__}: `split` must be one of {self.SPLITS}, got {split!r}.")
        self.root, self.split, self.transform = Path(root).expanduser(), split, transform
        if self.root.is_file():
            raise UserError(self._layout_message(f"`root` {self.root} is a file, not the dataset folder"))
        if not self.root.is_dir():
            raise FileNotFoundError(self._layout_message(f"dataset folder {self.root} does not exist"))
        self.paths: list[Path] = []
        self.labels = torch.zeros(0, dtype=torch.long)
        self.class_names: list[list[Hashable]] = [[]]

    def _layout_message(self, problem: str) -> str:
        return (
            f"{type(self).__name__}: {problem}. Expected layout under `root` ({self.root}): {self.LAYOUT}. "
            f"The dataset is obtained from {self.SOURCE}."
        )

    def required_path(self, *parts: str, folder: bool = False) -> Path:
        """``root/parts`` if it exists (as a folder when ``folder``), else a ``FileNotFoundError`` with the layout."""
        path = self.root.joinpath(*parts)
        if not (path.is_dir() if folder else path.is_file()):
            raise FileNotFoundError(self._layout_message(f"{'folder' if folder else 'file'} {path} not found"))
        return path

    def malformed_line(self, path: Path, line_number: int, line: str, expected: str) -> ValueError:
        return ValueError(
            self._layout_message(f"{path}, line {line_number}: expected {expected}, found {line.strip()!r}")
        )

    def set_samples(
        self,
        paths: Sequence[Path],
        rows: Sequence[Sequence[Hashable]],
        keep: Sequence[int] | None = None,
        problems: Problems | None = None,
        shown_as: Sequence[str] | None = None,
    ) -> None:
        """Store the samples, relabelling every column to contiguous ids over ``rows`` (all of them, so that
        e.g. query and gallery share ids), then keeping the positions ``keep`` (default: all).

        The kept files are checked (:func:`ranklit.data.datasets.validation.check_samples`; ``shown_as`` names each
        of ``paths`` in the message) and every problem, with those the reader recorded in ``problems``, is raised at
        once as a :class:`~ranklit.data.datasets.validation.DatasetError`.
        """
        labels, self.class_names = contiguous_labels(rows)
        if keep is not None:
            labels, paths = labels[torch.as_tensor(keep, dtype=torch.long)], [paths[i] for i in keep]
            shown_as = None if shown_as is None else [shown_as[i] for i in keep]
        if len(paths) == 0 and (problems is None or not problems.lines):
            raise ValueError(self._layout_message(f"split {self.split!r} lists no image"))
        if problems is None:
            problems = Problems(type(self).__name__, self.root)
        check_samples(problems, paths, shown_as)
        problems.raise_if_any()
        self.paths = list(paths)
        self.labels = labels[:, 0].clone() if labels.shape[1] == 1 else labels
        self.num_classes = int(torch.unique(labels[:, 0]).numel())
        warn_about_classes(type(self).__name__, self.split, labels[:, 0])

    def read_image(self, index: int) -> Image.Image:
        return load_image(self.paths[index])

    def _load_or_substitute(self, index: int, read: Callable[[int], _T]) -> _T:
        """``read(index)`` (:meth:`read_image`, or the item from the file); with ``on_bad_image="skip"``, ``read`` of
        the next decodable image of its class instead of an undecodable one (a warning names each file skipped)."""
        try:
            return read(index)
        except ValueError as error:
            if self.on_bad_image == EVALUATION_STOP:
                raise evaluation_image(error, type(self).__name__, self.split) from None
            if self.on_bad_image == NO_SKIP:
                raise UserError(outside_a_run(error)) from None
            if self.on_bad_image != "skip":
                raise
            warnings.warn(f"{type(self).__name__}: skipped (`on_bad_image: skip`): {error}", stacklevel=2)
        fine = self.labels if self.labels.dim() == 1 else self.labels[:, 0]
        mates = torch.nonzero(fine == fine[index]).flatten().tolist()
        start = mates.index(index)
        for mate in mates[start + 1 :] + mates[:start]:
            try:
                return read(mate)
            except ValueError as error:
                warnings.warn(f"{type(self).__name__}: skipped (`on_bad_image: skip`): {error}", stacklevel=2)
        raise UserError(
            f"{type(self).__name__}: no image of the class of {self.paths[index]} can be decoded (`on_bad_image: "
            "skip` found no replacement); fix or remove the class's files (`ranklit data check` lists them)."
        )

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> dict[str, Any]:
        from_file = getattr(self.transform, "from_file", None)  # ranklit's transforms (ranklit.data.images._crop_first)
        if from_file is not None and type(self).read_image is ImageRetrievalDataset.read_image:
            label = self.labels[int(index)]

            def item(i: int) -> dict[str, Any]:
                return retrieval_item(self.paths[i], label, index, from_file)

            return self._load_or_substitute(int(index), item)
        image = self._load_or_substitute(int(index), self.read_image)
        return retrieval_item(image, self.labels[int(index)], index, self.transform)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(root={str(self.root)!r}, split={self.split!r}, images={len(self)}, "
            f"classes={self.num_classes}, levels={1 if self.labels.dim() == 1 else self.labels.shape[1]})"
        )

