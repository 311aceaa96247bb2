"""Generic retrieval dataset laid out one folder per class (optionally nested per coarser level)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import torch

from ranklit._checks import check_positive_int
from ranklit.data.datasets.base import IMAGE_EXTENSIONS, ImageRetrievalDataset, split_pool
from ranklit.data.datasets.validation import Problems, check_samples, examples

__all__ = ["BrokenLinksWarning", "ClassFolderDataset"]


class BrokenLinksWarning(UserWarning):
    """Symbolic links that lead to no file (dangling or looping) were skipped: ``ranklit data check`` fails on it."""


class ClassFolderDataset(ImageRetrievalDataset):
    """Images stored as ``[<split>/]<coarsest>/.../<finest>/<image>``, ``levels`` folder levels deep.

    With ``levels=1`` each folder under ``root`` (or ``root/<split>``) is a class; with ``levels=2`` the layout is
    ``<coarse>/<fine>/<image>`` and labels are ``[fine, coarse]``, and so on. A class is identified by its whole
    folder path, so two ``fine`` folders of the same name under different parents are different classes and the
    hierarchy is consistent. ``split="query"`` and ``"gallery"`` are relabelled together (classes matched by folder
    names). Image files are those with the extensions of ``IMAGE_EXTENSIONS`` (any case); other files and hidden ones
    (``.DS_Store``, macOS ``._*`` copies) are skipped and counted in one warning that names a few. An image at another
    depth than ``levels`` class folders (a class nested one folder deeper, an image beside the class folders) is an
    error naming the files, with every other problem of the folder
    (:class:`~ranklit.data.datasets.validation.DatasetError`).

    **One folder of classes, split by class.** With ``train_fraction`` the classes under ``root`` itself (no split
    sub-folders) are divided class-disjointly, as retrieval benchmarks do: a permutation of the finest classes drawn
    with ``split_seed`` gives the first ``round(train_fraction × C)`` (at least one, and one left for testing) to
    ``split="train"`` and the rest to ``split="test"``. Train and test built with the same options never share a
    class.

    Args:
        root: the dataset folder.
        split: sub-folder to read (``"train"``, ``"test"``, ``"query"``...), or ``None`` to read ``root`` itself.
        transform: applied to the PIL image.
        levels: number of nested class-folder levels.
        train_fraction: fraction of the classes in the ``train`` split when ``root`` holds the classes directly
            (``split`` then ``"train"`` or ``"test"``); ``None``: read ``root/<split>``.
        split_seed: seed of the class permutation of ``train_fraction``.

    Example:
        >>> import tempfile, pathlib
        >>> from PIL import Image
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> for name in ("cats/tabby/1.png", "cats/siamese/1.png", "dogs/pug/1.png", "dogs/husky/1.png"):
        ...     (root / name).parent.mkdir(parents=True, exist_ok=True)
        ...     Image.new("RGB", (4, 4)).save(root / name)
        >>> data = ClassFolderDataset(root, levels=2)
        >>> data.labels.tolist(), data.num_classes
        ([[0, 0], [1, 0], [2, 1], [3, 1]], 4)
        >>> train = ClassFolderDataset(root, "train", levels=2, train_fraction=0.5)
        >>> test = ClassFolderDataset(root, "test", levels=2, train_fraction=0.5)
        >>> len(train) + len(test), set(train.paths) & set(test.paths)
        (4, set())
    """

    SPLITS = ()
    LAYOUT = "[<split>/]<class>/<image> (one folder per class), or <coarse>/<fine>/<image> with levels=2, ..."
    SOURCE = "your own data (one folder per class)"

    def __init__(
        self,
        root: str | Path,
        split: str | None = None,
        transform: Callable[[Any], Any] | None = None,
        *,
        levels: int = 1,
        train_fraction: float | None = None,
        split_seed: int = 0,
    ) -> None:
        super().__init__(root, split, transform)
        check_positive_int("levels", levels, " (label levels of ClassFolderDataset)")
        self.levels = levels
        if train_fraction is not None:
            self._split_classes(split, train_fraction, split_seed)
            return
        pool = [None] if split is None else [s for s in split_pool(split) if s == split or (self.root / s).is_dir()]
        paths: list[Path] = []
        rows: list[tuple[Hashable, ...]] = []
        keep: list[int] = []
        problems = Problems(type(self).__name__, self.root)
        for part in pool:
            folder = self.root if part is None else self.required_path(part, folder=True)
            files, part_rows = self._images(folder, problems)
            keep += list(range(len(paths), len(paths) + len(files))) if part == split else []
            paths += files
            rows += part_rows
        self.set_samples(paths, rows, keep, problems)

    def _images(self, base: Path, problems: Problems) -> tuple[list[Path], list[tuple[str, ...]]]:
        """The image files ``levels`` folders below ``base`` and their label rows (finest folder path first); images
        at another depth are recorded in ``problems``, other files skipped with a warning."""
        files, skipped, misplaced = [], [], []
        entries = sorted(base.rglob("*"))
        if broken := [f.relative_to(base) for f in entries if f.is_symlink() and not f.exists()]:
            warnings.warn(
                f"{type(self).__name__}: skipped {len(broken)} symbolic link(s) under {base} that lead to no file "
                f"(dangling or looping): {examples(broken)}.",
                BrokenLinksWarning,
                stacklevel=3,
            )
        for file in (f for f in entries if f.is_file()):
            relative = file.relative_to(base)
            if any(part.startswith(".") for part in relative.parts) or file.suffix.lower() not in IMAGE_EXTENSIONS:
                skipped.append(relative)
            elif len(relative.parts) != self.levels + 1:
                misplaced.append(relative)
            else:
                files.append(file)
        if skipped:
            warnings.warn(
                f"{type(self).__name__}: skipped {len(skipped)} file(s) under {base} that are hidden or not images "
                f"({' '.join(IMAGE_EXTENSIONS)}): {examples(skipped)}.",
                stacklevel=3,
            )
        layout = "/".join(["<class>"] * self.levels) + "/<image>"
        problems.add(
            f"images under {base} not at {layout} (levels={self.levels})",
            misplaced,
            "Move them into class folders of the same depth, or set `levels`",
        )
        folders = [file.relative_to(base).parts[:-1] for file in files]
        return files, [tuple("/".join(f[: self.levels - c]) for c in range(self.levels)) for f in folders]

    def _split_classes(self, split: str | None, train_fraction: float, seed: int) -> None:
        if split not in ("train", "test"):
            raise ValueError(
                f"ClassFolderDataset: with `train_fraction`, `split` must be 'train' or 'test', got {split!r}."
            )
        if not 0.0 < train_fraction < 1.0:
            raise ValueError(f"ClassFolderDataset: `train_fraction` must lie in (0, 1), got {train_fraction!r}.")
        problems = Problems(type(self).__name__, self.root)
        files, rows = self._images(self.root, problems)
        check_samples(problems, files)  # every file, whichever split it falls in
        problems.raise_if_any()
        classes = sorted({row[0] for row in rows})
        if len(classes) < 2:
            raise ValueError(self._layout_message(f"found {len(classes)} class folder(s); a train/test split needs 2"))
        order = torch.randperm(len(classes), generator=torch.Generator().manual_seed(seed)).tolist()
        cut = min(max(round(train_fraction * len(classes)), 1), len(classes) - 1)
        chosen = {classes[i] for i in (order[:cut] if split == "train" else order[cut:])}
        kept = [i for i, row in enumerate(rows) if row[0] in chosen]
        self.set_samples([files[i] for i in kept], [rows[i] for i in kept])
