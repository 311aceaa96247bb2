"""Safe reading of pickled ground-truth files (revisitop's ``gnd_*.pkl``): a restricted unpickler.

``pickle.load`` runs whatever callable a file names (``os.system`` included), so a crafted ``gnd_roxford5k.pkl``
would execute code. :func:`load_ground_truth` resolves only the globals the official files need: none for the
builtin containers and scalars (``dict``, ``list``, ``tuple``, ``str``, ``int``, ``float``, ``bool``, ``None`` are
pickle opcodes), and numpy's array and scalar reconstruction (``numpy.core.multiarray._reconstruct``,
``numpy.ndarray``, ``numpy.dtype``, ``numpy.core.multiarray.scalar``, ``numpy.core.numeric._frombuffer`` and
``_codecs.encode`` for arrays pickled by Python 2 era numpy). Any other global is refused with
``pickle.UnpicklingError`` naming it, before anything is called.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

__all__ = ["load_ground_truth"]

_NUMPY_CORE = ("numpy.core.multiarray", "numpy._core.multiarray", "numpy.core.numeric", "numpy._core.numeric")
_ALLOWED: frozenset[tuple[str, str]] = frozenset(
    {(module, "_reconstruct") for module in _NUMPY_CORE}
    | {(module, "scalar") for module in _NUMPY_CORE}
    | {(module, "_frombuffer") for module in _NUMPY_CORE}
    | {("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode")}
)


class _RestrictedUnpickler(pickle.Unpickler):
    @staticmethod
    def _module(module: str) -> str:
        import numpy

        if module.startswith("numpy.core.") and int(numpy.__version__.split(".")[0]) >= 2:
            return "numpy._core." + module.removeprefix("numpy.core.")  # numpy 2 renamed it (the old name warns)
        return module

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(
                f"the file asks for `{module}.{name}`, which a ground-truth file never needs (only builtin "
                "containers and numpy arrays are read); refusing to load it, since unpickling it could run code"
            )
        return super().find_class(self._module(module), name)


def load_ground_truth(path: str | Path) -> Any:
    """Unpickle ``path`` allowing only builtin containers and numpy arrays (module docstring).

    Raises:
        pickle.UnpicklingError: the file names any other global (e.g. ``os.system``), or is not a pickle.

    Example:
        >>> import io, os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "gnd.pkl")
        >>> class Evil:
        ...     def __reduce__(self):
        ...         return (os.system, ("echo pwned",))
        >>> with open(path, "wb") as f:
        ...     pickle.dump({"gnd": [Evil()]}, f)
        >>> load_ground_truth(path)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        _pickle.UnpicklingError: the file asks for `posix.system`, ...
    """
    with Path(path).open("rb") as handle:
        return _RestrictedUnpickler(handle).load()
