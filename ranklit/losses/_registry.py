"""One declaration per loss (as timm's ``@register_model``): :func:`register_loss` next to the class records it.

From that one line come ``ranklit.losses.__all__``, :func:`list_losses`, :func:`create_loss`, the parametrisation of
the registry-driven tests (``tests/losses/registry.py``: every loss and each of its declared examples gets the forward,
backward, dtype, permutation, minimum, reducer and validation checks) and the losses index of the documentation
(``docs/gen_pages.py``). ``ranklit/losses/__init__.py`` imports every module of the package, so a loss in a new module
registers itself without being listed anywhere else.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from torch import nn

from ranklit._public import defined_in, publish
from ranklit.errors import UserError

__all__ = ["LossEntry", "register_loss", "list_losses", "loss_entry", "create_loss", "import_submodules"]

LossT = TypeVar("LossT", bound=type[nn.Module])


@dataclass(frozen=True)
class LossEntry:
    """What the library, the tests and the docs know of a registered loss.

    Attributes:
        cls: the loss class.
        summary: what it optimises, in a few words (the docs index).
        paper: the paper (authors, venue, year) or ``"baseline"`` (the docs index).
        examples: constructor arguments for small tests, by variant (``""``: the defaults); a callable value is called
            with no argument (e.g. a sub-loss class, for a fresh instance per test).
        proxy: the loss learns one proxy per class: tests build it with ``num_classes`` and ``embedding_dim``.
        random: the loss draws random numbers in training mode (``True``: every variant; or the variants' names).
        ap: the loss is ``1 -`` a (surrogate) AP: at most 1, lower for a better ranking.
    """

    cls: type[nn.Module]
    summary: str
    paper: str
    examples: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: {"": {}})
    proxy: bool = False
    random: bool | tuple[str, ...] = False
    ap: bool = False

    @property
    def name(self) -> str:
        """The class name, e.g. ``"SupAPLoss"``."""
        return self.cls.__name__

    @property
    def takes_reducer(self) -> bool:
        """Whether the loss takes a ``reducer`` (:mod:`ranklit.functional.reducers`)."""
        return "reducer" in inspect.signature(self.cls).parameters

    def is_random(self, variant: str) -> bool:
        """Whether the ``variant`` of :attr:`examples` draws random numbers in training mode."""
        return self.random if isinstance(self.random, bool) else variant in self.random

    def example_arguments(self, variant: str = "") -> dict[str, Any]:
        """The constructor arguments of the ``variant`` example (callable values called)."""
        return {key: value() if callable(value) else value for key, value in self.examples[variant].items()}


_LOSSES: dict[str, LossEntry] = {}


def register_loss(
    *,
    summary: str,
    paper: str,
    examples: Mapping[str, Mapping[str, Any]] | None = None,
    proxy: bool = False,
    random: bool | tuple[str, ...] = False,
    ap: bool = False,
) -> Callable[[LossT], LossT]:
    """Class decorator recording a loss in the registry (arguments: the attributes of :class:`LossEntry`).

    Example:
        >>> from ranklit.losses import EmbeddingLoss
        >>> @register_loss(summary="mean squared norm", paper="baseline")
        ... class SquaredNormLoss(EmbeddingLoss):
        ...     queries_only = True
        ...     def embedding_loss(self, inputs):
        ...         return inputs.queries.square().sum(1).mean()
        >>> import torch
        >>> create_loss("SquaredNormLoss", normalize=False)(torch.full((2, 3), 2.0), torch.tensor([0, 1])).item()
        12.0
        >>> _ = _LOSSES.pop("SquaredNormLoss")  # (keep the doctest from adding a loss)
    """
    variants = {"": {}} if examples is None else dict(examples)

    def record(cls: LossT) -> LossT:
        known = _LOSSES.get(cls.__name__)
        if known is not None and _where(known.cls) != _where(cls):  # a module imported again re-registers its class
            raise ValueError(
                f"two losses are registered as {cls.__name__!r} ({_where(known.cls)} and {_where(cls)}): rename one"
            )
        _LOSSES[cls.__name__] = LossEntry(cls, summary, paper, variants, proxy, random, ap)
        return publish(cls, "ranklit.losses")

    return record


def _where(cls: type) -> str:
    return f"{defined_in(cls)}.{cls.__qualname__}"


def list_losses(*, takes_reducer: bool | None = None) -> list[str]:
    """The names of the registered losses, sorted; ``takes_reducer=True`` keeps those that take a ``reducer``.

    >>> "SupAPLoss" in list_losses(takes_reducer=True), "TripletLoss" in list_losses(takes_reducer=True)
    (True, False)
    """
    return sorted(name for name, e in _LOSSES.items() if takes_reducer is None or e.takes_reducer == takes_reducer)


def loss_entry(name: str) -> LossEntry:
    """The :class:`LossEntry` of the loss ``name`` (``UserError`` listing the losses when there is none).

    Example:
        >>> entry = loss_entry("SupAPLoss")
        >>> entry.paper, entry.ap, entry.proxy
        ('ROADMAP, NeurIPS 2021', True, False)
    """
    if name not in _LOSSES:
        raise UserError(f"no loss named {name!r}; the losses are {', '.join(list_losses())}.")
    return _LOSSES[name]


def create_loss(name: str, **kwargs: Any) -> nn.Module:
    """The loss ``name`` built with ``kwargs`` (as timm's ``create_model``).

    >>> create_loss("SmoothAPLoss", tau=0.05)
    SmoothAPLoss(tau=0.05, chunk_size=None, reducer='mean', normalize=True, include_self=False, engine='auto')
    """
    return loss_entry(name).cls(**kwargs)


def import_submodules(package: str, path: Iterable[str]) -> None:
    """Import every module of ``package`` but this one (their ``@register_loss`` declarations run)."""
    for module in pkgutil.iter_modules(path):
        if f"{package}.{module.name}" != __name__:
            importlib.import_module(f"{package}.{module.name}")
