"""The one way ranklit opens a checkpoint: weights only, never a full pickle.

A ``.ckpt`` (or ``.pt``) file is a pickle, and unpickling a file can call any function it names (``os.system``,
``subprocess.Popen``, ``builtins.exec``…). Every checkpoint ranklit reads goes through :func:`load_checkpoint`, which
calls ``torch.load(..., weights_only=True)``: torch's restricted unpickler, which refuses any global outside its set of
tensor rebuilders and plain containers *before* calling anything. That covers ``ranklit fit --ckpt_path``/``--resume``,
``test``/``validate``/``predict --ckpt_path`` (ranklit's check, then Lightning's own restore through
:class:`ranklit.training.SafeCheckpointIO`, which also writes every checkpoint atomically), ``export``, ``index``,
``search`` (the index's ``net.pt``), :func:`ranklit.deploy.load_model`, :meth:`ranklit.deploy.Retriever.from_index`
and :meth:`ranklit.models.RetrievalModule.load_from_checkpoint`.

**Why no allow-list.** What ranklit and Lightning write is tensors (``torch._utils._rebuild_tensor_v2`` and
``torch.*Storage``), ``collections.OrderedDict`` and plain values (dicts, lists, strings, numbers, ``None``): the
globals found in a ``ranklit fit`` checkpoint, all in torch's weights-only set. No class of ranklit's own is pickled
(the hyper-parameters are the config's ``class_path``/``init_args`` dicts), so nothing needs
``torch.serialization.add_safe_globals`` and nothing is loaded as a full pickle. A checkpoint that names any other
global is refused with one line naming the file.

**torch >= 2.6.** torch before 2.6 had a weights-only bypass (CVE-2025-32434): a crafted file could run code through
``torch.load(weights_only=True)``. ranklit requires torch 2.6 (``pyproject.toml``), and :func:`load_checkpoint`
refuses to load anything under an older torch (one installed with ``--no-deps``, say) rather than trust that bypass.

``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` does not change this: torch applies it only where ``weights_only`` is not given.

**A network rebuilt for a checkpoint's weights** (``export``, ``index``, ``search``, ``test``/``validate``/``predict
--ckpt_path``, ``RetrievalModule.load_from_checkpoint``) is built from its config with :func:`offline_rebuild`'s
``pretrained: false, weights: null``: the checkpoint holds every weight, so it needs neither the Hugging Face Hub
(nor its cache) nor the run's initial weights file again.
"""

from __future__ import annotations

import io
import pickle
import re
from pathlib import Path
from typing import IO, Any

import torch

from ranklit.errors import UserError

__all__ = ["REBUILT", "SAFE_TORCH", "check_safe_torch", "load_checkpoint", "offline_rebuild"]

REBUILT = {"pretrained": False, "weights": None}
"""The ``model.net.init_args`` a network rebuilt for a checkpoint's weights is built with (module docstring)."""

#: The oldest torch whose ``torch.load(weights_only=True)`` ranklit trusts (module docstring).
SAFE_TORCH = (2, 6)


def check_safe_torch(version: str | None = None) -> None:
    """Refuse (``UserError``) a torch older than :data:`SAFE_TORCH` (default: the installed ``torch.__version__``).

    Example:
        >>> check_safe_torch("2.6.0+cpu")
        >>> check_safe_torch("2.5.1")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ranklit.errors.UserError: torch 2.5.1 is installed: ranklit loads checkpoints only with torch >= 2.6 (...
    """
    version = str(torch.__version__) if version is None else version
    found = re.match(r"(\d+)\.(\d+)", version)
    if found is not None and (int(found.group(1)), int(found.group(2))) < SAFE_TORCH:
        raise UserError(
            f"torch {version} is installed: ranklit loads checkpoints only with torch >= 2.6 (before 2.6, a crafted "
            "file can run code through weights-only loading, CVE-2025-32434). Upgrade: pip install 'torch>=2.6'."
        )


def _refusal(name: str, error: pickle.UnpicklingError) -> str:
    """The line for torch's refusal: a global outside its set (code to run), or a file that is no pickle at all."""
    lines = [line.strip().rstrip(".") for line in str(error).splitlines()]
    detail = next((line for line in lines if "GLOBAL" in line), None)
    if detail is None:
        after = lines[next((i for i, line in enumerate(lines) if "error:" in line), len(lines)) + 1 :]
        cause = next((line for line in after if line), "not a torch file")  # e.g. "Unsupported operand 255"
        return f"{name}: cannot be read as a checkpoint (UnpicklingError: {cause[:200]})."
    return (
        f"{name}: refused to load a checkpoint that names code to run ({detail}): unpickling it could execute that "
        "code, so nothing of it was run. Use a checkpoint written by ranklit, from a source you trust."
    )


def load_checkpoint(source: str | Path | IO[bytes], *, map_location: Any = "cpu", name: str | None = None) -> Any:
    """Load a checkpoint weights-only (module docstring); every failure is one line naming the file.

    Args:
        source: the checkpoint file (or a binary file object).
        map_location: as ``torch.load``'s (default: every tensor on the CPU).
        name: how the messages call a file object (default: its ``name``, else "the checkpoint").

    Raises:
        UserError: the file is missing, names code to run (nothing of it is run), or is not a torch file; torch is
            older than 2.6 (:func:`check_safe_torch`).

    Example:
        >>> import os, tempfile
        >>> path = Path(tempfile.mkdtemp()) / "a.ckpt"
        >>> torch.save({"state_dict": {"w": torch.ones(2)}}, path)
        >>> load_checkpoint(path)["state_dict"]["w"]
        tensor([1., 1.])
        >>> class Payload:
        ...     def __reduce__(self):
        ...         return (os.system, ("echo pwned",))
        >>> torch.save({"state_dict": {"w": Payload()}}, path)
        >>> load_checkpoint(path)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ranklit.errors.UserError: ...a.ckpt: refused to load a checkpoint that names code to run (...system...)...
    """
    check_safe_torch()
    if name is None:
        name = str(source) if isinstance(source, (str, Path)) else str(getattr(source, "name", "the checkpoint"))
    if isinstance(source, (str, Path)) and not Path(source).is_file():
        raise UserError(f"checkpoint {source} not found{' (a folder)' if Path(source).is_dir() else ''}.")
    try:
        if isinstance(source, (str, Path)):
            return torch.load(source, map_location=map_location, weights_only=True)
        return torch.load(io.BytesIO(source.read()), map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        raise UserError(_refusal(name, error)) from None
    except Exception as error:  # not a torch file, truncated, unreadable...
        first_line = (str(error).splitlines() or [""])[0][:200]
        raise UserError(f"{name}: cannot be read as a checkpoint ({type(error).__name__}: {first_line}).") from None


def offline_rebuild(init_args: Any) -> list[str]:
    """Set the :data:`REBUILT` values among ``init_args`` (a dict or a jsonargparse ``Namespace``) in place; return
    the names changed. A key the network does not take is not added (any ``nn.Module`` may be ``model.net``).

    Example:
        >>> init_args = {"backbone": "resnet50", "pretrained": True, "weights": None}
        >>> offline_rebuild(init_args), init_args["pretrained"]
        (['pretrained'], False)
    """
    changed = [key for key, value in REBUILT.items() if key in init_args and init_args[key] != value]
    for key in changed:
        init_args[key] = REBUILT[key]
    return changed
