"""The import paths that moved in ranklit 0.2.0, in one table: each old path still works until :data:`REMOVED_IN`,
giving the same object with a ``DeprecationWarning`` that names the new path.

- A moved **module** (``ranklit.training.resume``) is an alias: :class:`_OldModules`, on ``sys.meta_path`` (installed by
  ``ranklit/__init__.py``), answers the old name with the new module itself, so ``import ranklit.training.resume``
  and ``ranklit.callbacks.resume`` are one module object. It warns when the old name is first imported.
- A moved **name** of a package (``ranklit.training.RunCheckpoint``, as an old config's ``class_path`` names it) is
  served by the package's module ``__getattr__`` (:func:`old_names`), warning on each access.

Nothing here runs for the new paths: a program that uses them sees no warning. The ``ranklit`` command line shows these
warnings (:mod:`ranklit.cli.warning_filters`), since the old path is then in the user's config.

Example:
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     from ranklit.training import RunCheckpoint
    >>> import ranklit.callbacks
    >>> RunCheckpoint is ranklit.callbacks.RunCheckpoint
    True
    >>> moved, removal = str(caught[0].message).split("; ")
    >>> moved
    '`ranklit.training.RunCheckpoint` moved to `ranklit.callbacks.RunCheckpoint`'
    >>> removal
    'the old path will be removed in ranklit 0.3.0.'
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

__all__ = ["MESSAGE", "MESSAGE_PATTERN", "MODULES", "NAMES", "REMOVED_IN", "install", "old_names"]

REMOVED_IN = "0.3.0"
MESSAGE = "`{old}` moved to `{new}`; the old path will be removed in ranklit {removed}."
MESSAGE_PATTERN = r"`ranklit\.[\w.]+` moved to `ranklit\."  # a regular expression matching the start of MESSAGE

MODULES = {  # old module -> new module
    "ranklit.config_files": "ranklit.cli.config_files",
    "ranklit.data_check": "ranklit.cli.data_check",
    "ranklit.error_surface": "ranklit.cli.error_surface",
    "ranklit.warning_filters": "ranklit.cli.warning_filters",
    "ranklit.training.runs": "ranklit.cli.runs",
    "ranklit.training.resuming": "ranklit.cli.resuming",
    "ranklit.training.resume": "ranklit.callbacks.resume",
    "ranklit.training.faults": "ranklit.callbacks.faults",
    "ranklit.training.checkpoints": "ranklit.callbacks.checkpoints",
    "ranklit.training.locks": "ranklit.callbacks.locks",
    "ranklit.training.new_rates": "ranklit.callbacks.new_rates",
    "ranklit.models.ranking_images": "ranklit.callbacks.ranking_images",
    "ranklit.models.predictions": "ranklit.callbacks.predictions",
    "ranklit.data._sampling": "ranklit.data.sampler_base",
    "ranklit.functional.positive_ranks": "ranklit.functional._positive_ranks",
    "ranklit.functional.symmetric_ranks": "ranklit.functional._symmetric_ranks",
    "ranklit.functional.sharding": "ranklit.functional._sharding",
    "ranklit.functional.query_values": "ranklit.functional._query_values",
    "ranklit.functional.metric_options": "ranklit.functional._metric_options",
}

NAMES = {  # package -> {name it exported: the package that exports it now}
    "ranklit.training": dict.fromkeys(
        ("FaultTolerance", "ResumableTraining", "ResumeRefused", "RunCheckpoint"), "ranklit.callbacks"
    ),
    "ranklit.models": dict.fromkeys(("EmbeddingWriter", "RankingGridLogger", "load_predictions"), "ranklit.callbacks"),
}


_OURS = (__file__, importlib.__file__)  # frames between the old path and the warning, besides the import system's


def _machinery(filename: str) -> bool:
    """Whether a frame of ``filename`` is the import system's (``warnings`` skips those when counting stack levels)."""
    return "importlib" in filename and "_bootstrap" in filename


def _warn(old: str, new: str) -> None:
    """The deprecation warning, attributed to the line that named ``old`` (past this module and the import system)."""
    frame, level = sys._getframe(1), 2
    while frame.f_back is not None and (frame.f_code.co_filename in _OURS or _machinery(frame.f_code.co_filename)):
        level += not _machinery(frame.f_code.co_filename)
        frame = frame.f_back
    warnings.warn(MESSAGE.format(old=old, new=new, removed=REMOVED_IN), DeprecationWarning, stacklevel=level)


class _OldModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old module names of :data:`MODULES`; loading one returns the new module (warning once)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MODULES:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = importlib.import_module(MODULES[spec.name])
        spec.loader_state = new.__spec__  # the import system sets `__spec__` to the alias's spec: restored below
        _warn(spec.name, MODULES[spec.name])
        return new

    def exec_module(self, module: ModuleType) -> None:
        assert module.__spec__ is not None
        module.__spec__ = module.__spec__.loader_state  # the new module's own spec


def install() -> None:
    """Put the finder of the old module names on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _OldModules) for finder in sys.meta_path):
        sys.meta_path.append(_OldModules())


def old_names(package: str) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: its moved names (:data:`NAMES`), with a warning."""

    def __getattr__(name: str) -> Any:
        if (home := NAMES[package].get(name)) is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if not _machinery(sys._getframe(1).f_code.co_filename):  # `from package import name` asks twice: warn once
            _warn(f"{package}.{name}", f"{home}.{name}")
        return getattr(importlib.import_module(home), name)

    return __getattr__
