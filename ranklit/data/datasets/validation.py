"""The checks every dataset runs on its index before training, reported all at once.

A dataset collects the problems of its index (rows of a CSV, files of a folder) in a :class:`Problems` list and
raises one :class:`DatasetError` listing every kind of problem with its count and the first few instances, so a user
fixes the CSV or the folder once, not once per problem. The checks shared by all readers
(:func:`check_samples`): listed files that are missing or empty, files listed twice. Warnings (the run can go on,
the user should know): in an evaluation split, classes with a single image (queries without a positive) and 2
classes (retrieval metrics near their maximum by chance); a single class is an error (metrics 1 by construction).
Whether every file decodes is checked by ``ranklit data check`` (:mod:`ranklit.data.check`), not on every run.
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from torch import Tensor

from ranklit.data.datasets._inside_root import OUTSIDE_FIX, outside_root
from ranklit.errors import UserError

__all__ = [
    "OUTSIDE_FIX",
    "DatasetError",
    "Problems",
    "check_samples",
    "examples",
    "outside_root",
    "warn_about_classes",
]

SHOWN = 3  # instances listed per kind of problem
KINDS = 4  # kinds of problem listed (the message stays within 6 lines)


class DatasetError(UserError):
    """Something wrong with the user's data files (a CSV, a folder): the message says what, where, and the fix."""


def examples(items: Sequence[object], shown: int = SHOWN) -> str:
    """The first ``shown`` items and how many more.

    >>> examples(["a.jpg", "b.jpg", "c.jpg", "d.jpg", "e.jpg"])
    'a.jpg, b.jpg, c.jpg and 2 more'
    """
    head = ", ".join(str(item) for item in items[:shown])
    return head if len(items) <= shown else f"{head} and {len(items) - shown} more"


class Problems:
    """The problems found in one dataset's index: one line per kind, with a count and examples.

    Example:
        >>> problems = Problems("CSVDataset", "data.csv")
        >>> problems.add("rows with 2 fields instead of 3", ["line 4", "line 9"])
        >>> problems.raise_if_any()
        Traceback (most recent call last):
        ...
        ranklit.data.datasets.validation.DatasetError: CSVDataset: 2 problems in data.csv; fix them all, then rerun:
          - 2 rows with 2 fields instead of 3: line 4, line 9
    """

    def __init__(self, owner: str, where: str | Path) -> None:
        self.owner, self.where, self.count = owner, str(where), 0
        self.lines: list[str] = []

    def add(self, what: str, instances: Sequence[object], fix: str = "") -> None:
        """Record ``len(instances)`` problems of one kind (nothing when empty)."""
        if instances:
            self.count += len(instances)
            self.lines.append(f"  - {len(instances)} {what}: {examples(instances)}{f'. {fix}' if fix else ''}")

    def raise_if_any(self) -> None:
        if self.lines:
            noun = "problem" if self.count == 1 else "problems"
            header = f"{self.owner}: {self.count} {noun} in {self.where}; fix them all, then rerun:"
            more = [f"  - and {len(self.lines) - KINDS} more kind(s) of problem"] if len(self.lines) > KINDS else []
            raise DatasetError("\n".join([header, *self.lines[:KINDS], *more]))


def check_samples(problems: Problems, paths: Sequence[Path], shown_as: Sequence[str] | None = None) -> None:
    """Record listed files that are missing or empty, and files listed twice (``shown_as``: how to name each
    sample in the message, e.g. ``"line 7 (a.jpg)"``; default: its path)."""
    names = list(shown_as) if shown_as is not None else [str(p) for p in paths]
    missing, empty = [], []
    for path, name in zip(paths, names, strict=True):
        try:
            if os.stat(path).st_size == 0:
                empty.append(name)
        except OSError:
            missing.append(name)
    problems.add("listed files not found", missing, "Fix the paths (relative to `root`) or remove the rows")
    problems.add("empty files (0 bytes)", empty, "Re-copy or remove them")
    first: dict[Path, str] = {}
    twice = [f"{name}, first at {first[path]}" for path, name in zip(paths, names, strict=True)
             if first.setdefault(path, name) != name]
    problems.add("files listed more than once (they would count as extra queries)", twice, "Keep one row each")


def warn_about_classes(owner: str, split: str | None, fine: Tensor) -> None:
    """In an evaluation split (``test``, ``val``): refuse a single class (every image is a positive: metrics are 1 by
    construction), warn about fewer than 3 classes and about single-image classes."""
    if split not in ("test", "val"):
        return
    counts = Counter(fine.tolist())
    where = f"{owner} (split {split!r})"
    if len(counts) < 2:
        raise DatasetError(
            f"{where} has a single class: every image retrieved is a positive, so every metric is 1.0 by construction. "
            "Evaluate on 3 classes or more (with `train_fraction`, a folder needs 4 classes or more)."
        )
    if len(counts) < 3:
        warnings.warn(
            f"{where} has {len(counts)} classes: retrieval metrics (mAP@R, R@1) are close to their maximum by chance "
            "with so few; evaluate on 3 classes or more (better 10+).",
            stacklevel=4,
        )
    if single := sorted(c for c, n in counts.items() if n == 1):
        warnings.warn(
            f"{where}: {len(single)} of {len(counts)} classes have a single image: as queries they have no positive "
            "(counted in `num_queries_without_positive`).",
            stacklevel=4,
        )
