"""The public names and modules that moved, in one table (:data:`MOVED`), so that code written for an older layout
is told where each one went instead of a bare ``AttributeError`` / ``cannot import name``.

Nothing is aliased: the old path still fails (no shim was kept for moves made before the first release), but its
error names the new path. Two doors lead to an old path, and both read the table:

- an attribute, ``ranklit.data.RevisitedLandmarks``: the package's module ``__getattr__`` (PEP 562) raises
  :func:`moved_attribute`'s ``AttributeError`` (so ``hasattr`` and ``getattr(..., default)`` behave as before);
- an import, ``from ranklit.data import RevisitedLandmarks`` or ``import ranklit.landmarks.descriptors``: Python
  then looks for a module of that name, and the finder :func:`install` puts at the end of ``sys.meta_path`` raises
  an ``ImportError`` with the same message (Python replaces an ``AttributeError`` of a ``from`` import by its own
  "cannot import name").

A config's ``class_path`` naming an old path gets the same new path (``ranklit/cli/_errors/_parser_messages.py``
reads the table). A name that moves again, or a new move, is one row here; ``tests/test_moved_names.py`` checks every
row (the new path exists, the old one fails with the message, both doors). A public *module* moved by a release that
published it keeps working instead, as a shim with a ``FutureWarning`` (:func:`ranklit._deprecation.moved_module`).

Example:
    >>> print(moved_message("ranklit.data.RevisitedLandmarks"))
    `ranklit.data.RevisitedLandmarks` has moved: it is `ranklit.landmarks.RevisitedLandmarks` now.
    >>> moved_attribute("ranklit.data", "NoSuchName").args[0]
    "module 'ranklit.data' has no attribute 'NoSuchName'"
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, NoReturn

__all__ = ["MOVED", "install", "moved_attribute", "moved_getattr", "moved_message"]

MOVED: dict[str, str] = {  # old public path -> its public path now (CHANGELOG.md "Changed" names each move)
    # the Revisited readers, their metric function and the whitening went to the landmarks pipeline
    "ranklit.data.RevisitedLandmarks": "ranklit.landmarks.RevisitedLandmarks",
    "ranklit.data.RevisitedTestSet": "ranklit.landmarks.RevisitedTestSet",
    "ranklit.functional.revisited_map": "ranklit.landmarks.revisited_map",
    "ranklit.functional.learn_whitening": "ranklit.landmarks.learn_whitening",
    "ranklit.landmarks.RevisitedMetrics": "ranklit.metrics.RevisitedMetrics",
    # the embedding store and exact search left the landmarks pipeline for their own package
    "ranklit.landmarks.DescriptorShards": "ranklit.index.DescriptorShards",
    "ranklit.landmarks.DescriptorWriter": "ranklit.index.DescriptorWriter",
    "ranklit.landmarks.as_descriptors": "ranklit.index.as_descriptors",
    "ranklit.landmarks.open_descriptors": "ranklit.index.open_descriptors",
    "ranklit.landmarks.query_scores": "ranklit.index.query_scores",
    "ranklit.landmarks.top_k": "ranklit.index.top_k",
    "ranklit.landmarks.descriptors": "ranklit.index.descriptors",
    "ranklit.landmarks.neighbours": "ranklit.index.neighbours",
    # every Lightning callback is in ranklit.callbacks
    "ranklit.training.FaultTolerance": "ranklit.callbacks.FaultTolerance",
    "ranklit.training.ResumableTraining": "ranklit.callbacks.ResumableTraining",
    "ranklit.training.ResumeRefused": "ranklit.callbacks.ResumeRefused",
    "ranklit.training.RunCheckpoint": "ranklit.callbacks.RunCheckpoint",
    "ranklit.models.EmbeddingWriter": "ranklit.callbacks.EmbeddingWriter",
    "ranklit.models.RankingGridLogger": "ranklit.callbacks.RankingGridLogger",
    "ranklit.models.load_predictions": "ranklit.callbacks.load_predictions",
}


def moved_message(old: str) -> str | None:
    """The one line for the old path ``old`` (a name or a module), or ``None`` when it did not move."""
    new = MOVED.get(old)
    if new is None:
        return None
    return f"`{old}` has moved: it is `{new}` now."


def moved_attribute(package: str, name: str) -> AttributeError:
    """The ``AttributeError`` for ``package.name``: the move's line when the table has it, else Python's own words."""
    message = moved_message(f"{package}.{name}") or f"module {package!r} has no attribute {name!r}"
    return AttributeError(message, name=name, obj=sys.modules.get(package))


def moved_getattr(package: str) -> Callable[[str], NoReturn]:
    """A module ``__getattr__`` for a package with no lazy names: every missing name is :func:`moved_attribute`'s."""

    def __getattr__(name: str) -> NoReturn:
        raise moved_attribute(package, name)

    return __getattr__


class _MovedFinder:
    """Answers an import of an old path of :data:`MOVED` with an ``ImportError`` naming the new path; every other
    name is left to the finders before it (it is consulted only for a module none of them found)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        message = moved_message(fullname)
        if message is not None:
            raise ImportError(message, name=fullname)
        return None


def install() -> None:
    """Put the finder of the old paths at the end of ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
