"""What ``ranklit data check`` finds in datasets: every image decoded, sizes and modes, duplicates across splits.

:func:`inspect_split` reads every file of a dataset once: its SHA-1 (exact duplicate files), its size and mode as
Pillow opens it, and a full decode with :func:`ranklit.data.images.decoding.load_image` (a truncated or corrupt file is
*unreadable*). :func:`leaks` finds files with the same content in the training split and an evaluation split (an
evaluation image seen in training: a leak that inflates every metric). :func:`report_lines` turns it into the
summary a user acts on.
"""

from __future__ import annotations

import hashlib
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image
from torch import Tensor

from ranklit.data.datasets.validation import examples
from ranklit.data.images.decoding import load_image

__all__ = ["SplitReport", "inspect_split", "leaks", "report_lines", "splits_with_images"]


@dataclass
class SplitReport:
    """One split's figures: images, classes, images per class, sizes, modes, unreadable files, content hashes."""

    name: str
    images: int
    classes: int
    per_class: tuple[int, float, int]  # min, median, max images per (finest) class
    sizes: list[tuple[int, int]] = field(default_factory=list)
    modes: Counter = field(default_factory=Counter)
    unreadable: list[str] = field(default_factory=list)
    hashes: dict[str, list[Path]] = field(default_factory=dict)
    split: str | None = None  # the dataset's own split (the "val" role may read the test split)
    levels: tuple[int, ...] = ()  # classes per label column, finest first, with hierarchical labels
    conflicts: list[str] = field(default_factory=list)  # files of identical content with different labels


def _per_class(labels: Tensor) -> tuple[int, float, int]:
    fine = labels if labels.dim() == 1 else labels[:, 0]
    counts = Counter(fine.tolist()).values()
    return (min(counts), statistics.median(counts), max(counts)) if counts else (0, 0.0, 0)


def splits_with_images(name: str, dataset: object) -> list[tuple[str, object]]:
    """The parts of ``dataset`` that hold image files, named: a set made of several datasets (a
    :class:`~ranklit.landmarks.RevisitedTestSet`: each benchmark's queries and gallery) through its
    ``named_parts()``, any other dataset as itself, ``None`` as nothing."""
    if dataset is None:
        return []
    if hasattr(dataset, "named_parts"):
        return [(f"{name.removesuffix('_dataset')} {part}", data) for part, data in dataset.named_parts()]
    return [(name, dataset)]


def inspect_split(name: str, dataset: object, progress: bool = True) -> SplitReport:
    """Decode every image of ``dataset`` as training reads it (the ``read_image`` of an
    :class:`~ranklit.data.ImageRetrievalDataset`; a dataset without files, like
    :class:`~ranklit.data.SyntheticHierarchy`, gets only its counts). Whatever a file raises makes it *unreadable*,
    with its cause: the check never stops."""
    labels: Tensor = dataset.labels  # type: ignore[attr-defined]
    fine = labels if labels.dim() == 1 else labels[:, 0]
    report = SplitReport(name, len(labels), int(fine.unique().numel()), _per_class(labels))
    report.split = getattr(dataset, "split", None)
    if labels.dim() == 2 and labels.shape[1] > 1:
        report.levels = tuple(int(labels[:, h].unique().numel()) for h in range(labels.shape[1]))
    names = (getattr(dataset, "class_names", None) or [[]])[0]  # the original labels, where the dataset keeps them
    labelled: dict[str, list[tuple[Path, object]]] = {}
    paths: Sequence[Path] = getattr(dataset, "paths", [])
    read = getattr(dataset, "read_image", lambda index: load_image(paths[index]))
    for index in _bar(range(len(paths)), f"data check: {name}", progress):
        path = paths[index]
        try:
            read(index)  # first: a UserError for every cause (ranklit.data.images._unreadable), a bomb included
            content = Path(path).read_bytes()
            with Image.open(path) as image:
                report.sizes.append(image.size)
                report.modes[image.mode] += 1
        except Exception as error:  # a check reports every file, whatever it raises
            cause = str(error).splitlines()[0] if str(error) else type(error).__name__
            report.unreadable.append(f"{path} ({cause.replace(f'Could not decode image {path}: ', '')})")
            continue
        digest = hashlib.sha1(content).hexdigest()
        report.hashes.setdefault(digest, []).append(Path(path))
        if len(fine) == len(paths):  # one label per file (not so for a Revisited set's parts)
            label = int(fine[index])
            labelled.setdefault(digest, []).append((Path(path), names[label] if 0 <= label < len(names) else label))
    report.conflicts = [" = ".join(f"{path} (label {label})" for path, label in files)
                        for files in labelled.values() if len({label for _, label in files}) > 1]
    return report


def _bar(items: Sequence[int], description: str, progress: bool) -> Iterable[int]:
    if not progress or not items:
        return items
    from tqdm import tqdm

    return tqdm(items, desc=description, unit="image", leave=False, disable=None)


def leaks(reports: Sequence[SplitReport], training: str = "train_dataset") -> list[str]:
    """Files of identical content in the training split and an evaluation split, as ``"a.jpg (train) = b.jpg
    (val)"``: an evaluation image seen in training inflates every metric."""
    owners: dict[str, list[tuple[str, Path]]] = {}
    for report in reports:
        for digest, paths in report.hashes.items():
            owners.setdefault(digest, []).extend((report.name, path) for path in paths)
    return [
        " = ".join(f"{path} ({name.removesuffix('_dataset')})" for name, path in files)
        for files in owners.values()
        if training in (names := {name for name, _ in files}) and len(names) > 1
    ]


def _range(values: Sequence[float]) -> str:
    return f"{min(values):g} / {statistics.median(values):g} / {max(values):g}" if values else "-"


def report_lines(reports: Sequence[SplitReport], leaked: Sequence[str], plan: str) -> list[str]:
    """The summary: one block per split, then the problems (unreadable files, leaks) and the batch plan."""
    lines = []
    for r in reports:
        sides = [min(size) for size in r.sizes]
        modes = ", ".join(f"{mode} {n}" for mode, n in r.modes.most_common())
        role = r.name.removesuffix("_dataset")
        split = f" (split {r.split!r})" if r.split is not None and r.split not in role.split() else ""
        lines += [
            f"{role}{split}: {r.images} images, {r.classes} classes; images per class "
            f"min / median / max {r.per_class[0]} / {r.per_class[1]:g} / {r.per_class[2]}",
            f"  shorter side (px) min / median / max {_range(sides)}; modes: {modes or '-'}",
        ]
        if r.levels:
            counts = " / ".join(str(n) for n in r.levels)
            lines.append(f"  label hierarchy: {len(r.levels)} levels, {counts} classes (finest to coarsest)")
        if r.conflicts:
            lines.append(f"  PROBLEM: {len(r.conflicts)} files of identical content with different labels: "
                         f"{examples(r.conflicts)}")
        if r.unreadable:
            lines.append(f"  PROBLEM: {len(r.unreadable)} unreadable files: {examples(r.unreadable)}")
    if leaked:
        lines.append(f"PROBLEM: {len(leaked)} files with the same content in two splits (a leak): {examples(leaked)}")
    lines.append(f"batch plan: {plan}")
    return lines
