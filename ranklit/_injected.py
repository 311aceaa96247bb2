"""The parts a config injects, type-checked before any of them is called.

A config names the code it runs: every ``class_path`` is imported and called with its ``init_args`` (docs page
"CLI and configs", section "What a config can do"). jsonargparse checks a ``class_path`` against the declared class
of most keys (``model.net`` must be an ``nn.Module``…), but a key declared as a *callable* (the optimiser and
scheduler factories, the batch sampler factory, a dataset's ``transform``) takes any function, which is then
called with the ``init_args``: ``model.optimizer: {class_path: os.system, init_args: {command: ...}}`` would run a
shell command. :func:`check_injected` refuses, before anything is built:

- a ``class_path`` anywhere in the config that does not name a class (a function, a module, nothing);
- at the callable keys, a class (or a plain import path) that is not of the expected kind: ``model.optimizer`` a
  ``torch.optim.Optimizer`` subclass, ``model.lr_scheduler`` an ``LRScheduler`` (or ``ReduceLROnPlateau``),
  ``data.batch_sampler`` a ``torch.utils.data.Sampler``, a ``transform`` a class whose instances are callable.

The ``ranklit`` command checks its config (after Lightning merged a ``--ckpt_path``'s hyper-parameters into it), and
:meth:`ranklit.models.RetrievalModule.load_from_checkpoint` the hyper-parameters of the file (a checkpoint's
hyper-parameters are a config). Each refusal is one :class:`ranklit.errors.UserError` naming the key, the value and
the expected type. This keeps
a typo or a hostile value out of the calls ranklit makes; it does not make a config safe to run: importing a module
runs its code, as a Python script does.

Example:
    >>> check_injected({"model": {"optimizer": {"class_path": "torch.optim.SGD", "init_args": {"lr": 0.1}}}})
    >>> check_injected({"model": {"optimizer": {"class_path": "os.system", "init_args": {"command": "ls"}}}})
    Traceback (most recent call last):
    ...
    ranklit.errors.UserError: `model.optimizer: os.system` is a function, not a class: ...
"""

from __future__ import annotations

import pydoc
from typing import Any

import torch
from torch.optim.lr_scheduler import LRScheduler, ReduceLROnPlateau
from torch.utils.data import Sampler

from ranklit.errors import UserError

__all__ = ["check_injected"]

_EXPECTED: dict[str, tuple[tuple[type, ...], str]] = {
    "model.optimizer": ((torch.optim.Optimizer,), "a `torch.optim.Optimizer` subclass, e.g. `torch.optim.Adam`"),
    "model.lr_scheduler": (
        (LRScheduler, ReduceLROnPlateau),
        "a `torch.optim.lr_scheduler.LRScheduler` subclass, e.g. `torch.optim.lr_scheduler.CosineAnnealingLR`",
    ),
    "data.batch_sampler": ((Sampler,), "a `torch.utils.data.Sampler` subclass, e.g. `ranklit.data.PKSampler`"),
}
_TRANSFORM = "a class whose instances are called on the image (an `nn.Module` or a torchvision transform)"
_SEE = "a config imports and runs the code it names: see \"What a config can do\" in docs/cli.md"


def _expected(key: str) -> tuple[tuple[type, ...], str] | None:
    if key in _EXPECTED:
        return _EXPECTED[key]
    if key.rsplit(".", 1)[-1] in ("transform", "target_transform"):
        return (object,), _TRANSFORM
    return None


def _check_class(key: str, path: str, expected: tuple[tuple[type, ...], str] | None) -> None:
    found = pydoc.locate(path)
    if found is None:
        raise UserError(f"`{key}: {path}` does not import: check the spelling of the module and class.")
    wanted = expected[1] if expected is not None else "a class"
    if not isinstance(found, type):
        kind = "a module" if type(found).__name__ == "module" else "a function" if callable(found) else "a value"
        raise UserError(f"`{key}: {path}` is {kind}, not a class: give {wanted}; {_SEE}.")
    if expected is None:
        return
    bases, _ = expected
    instances_callable = any("__call__" in vars(k) for k in found.__mro__) if expected[1] == _TRANSFORM else True
    if not issubclass(found, bases) or not instances_callable:
        raise UserError(f"`{key}: {path}` is not {wanted}; {_SEE}.")


def check_injected(config: Any, key: str = "") -> None:
    """Refuse a config part that would call something other than the class its key expects (module docstring).

    Args:
        config: a parsed config as plain data (``Namespace.as_dict()``): ``{"model": ..., "data": ...}``.
        key: the dotted key of ``config`` (empty at the top).

    Raises:
        UserError: naming the key, the value and the expected type.
    """
    if isinstance(config, list):
        for index, item in enumerate(config):
            check_injected(item, f"{key}[{index}]" if key else str(index))
        return
    if isinstance(config, str) and _expected(key) is not None and "." in config:
        _check_class(key, config, _expected(key))  # an import path given without `class_path`
        return
    if not isinstance(config, dict):
        return
    if isinstance(config.get("class_path"), str):
        _check_class(key, config["class_path"], _expected(key))
    for name, value in config.items():
        check_injected(value, f"{key}.{name}" if key else str(name))
