"""Generic retrieval dataset laid out one folder per class (optionally nested per coarser level)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

from ranklit.data.datasets.base import IMAGE_EXTENSIONS, ImageRetrievalDataset, split_pool

__all__ = ["ClassFolderDataset"]


class ClassFolderDataset(ImageRetrievalDataset):
    """Images stored as ``[<split>/]<coarsest>/.../<finest>/<image>``, ``levels`` folder levels deep.

    With ``levels=1`` each folder under ``root`` (or ``root/<split>``) is a class; with ``levels=2`` the layout is
    ``<coarse>/<fine>/<image>`` and labels are ``[fine, coarse]``, and so on. A class is identified by its whole
    folder path, so two ``fine`` folders of the same name under different parents are different classes and the
    hierarchy is consistent. ``split="query"`` and ``"gallery"`` are relabelled together (classes matched by folder
    names). Image files are those with the extensions of ``IMAGE_EXTENSIONS``; other files are ignored.

    Args:
        root: the dataset folder.
        split: sub-folder to read (``"train"``, ``"test"``, ``"query"``...), or ``None`` to read ``root`` itself.
        transform: applied to the PIL image.
        levels: number of nested class-folder levels.

    Example:
        >>> import tempfile, pathlib
        >>> from PIL import Image
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> for name in ("cats/tabby/1.png", "cats/siamese/1.png", "dogs/pug/1.png"):
        ...     (root / name).parent.mkdir(parents=True, exist_ok=True)
        ...     Image.new("RGB", (4, 4)).save(root / name)
        >>> data = ClassFolderDataset(root, levels=2)
        >>> data.labels.tolist(), data.num_classes
        ([[0, 0], [1, 0], [2, 1]], 3)
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
    ) -> None:
        super().__init__(root, split, transform)
        if isinstance(levels, bool) or not isinstance(levels, int) or levels < 1:
            raise ValueError(f"ClassFolderDataset: `levels` must be a positive integer, got {levels!r}.")
        self.levels = levels
        pool = [None] if split is None else [s for s in split_pool(split) if s == split or (self.root / s).is_dir()]
        paths: list[Path] = []
        rows: list[tuple[Hashable, ...]] = []
        keep: list[int] = []
        for part in pool:
            base = self.root if part is None else self._file(part, folder=True)
            files = sorted(f for f in base.glob("/".join(["*"] * (levels + 1))) if f.suffix.lower() in IMAGE_EXTENSIONS)
            keep += list(range(len(paths), len(paths) + len(files))) if part == split else []
            for file in files:
                folders = file.relative_to(base).parts[:-1]
                rows.append(tuple("/".join(folders[: levels - c]) for c in range(levels)))
                paths.append(file)
        self._set_samples(paths, rows, keep)
