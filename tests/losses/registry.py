"""The tests' view of the loss registry (``@register_loss`` next to each class): one factory per loss and declared
example, built for the small test batches (``NUM_CLASSES`` fine classes, ``DIM``-dimensional embeddings)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from torch import nn

from ranklit.losses import list_losses, loss_entry

NUM_CLASSES, DIM = 6, 8


def _build(name: str, variant: str) -> nn.Module:
    entry = loss_entry(name)
    sizes = {"num_classes": NUM_CLASSES, "embedding_dim": DIM} if entry.proxy else {}
    return entry.cls(**sizes, **entry.example_arguments(variant))


def _test_name(name: str, variant: str) -> str:
    return f"{name}_{variant}" if variant else name


REGISTRY: dict[str, Callable[[], nn.Module]] = {
    _test_name(name, variant): partial(_build, name, variant)
    for name in list_losses()
    for variant in loss_entry(name).examples
}
_OF = {_test_name(n, v): (loss_entry(n), v) for n in list_losses() for v in loss_entry(n).examples}

PROXY_LOSSES = {test for test, (entry, _) in _OF.items() if entry.proxy}
RANDOM_LOSSES = {test for test, (entry, variant) in _OF.items() if entry.is_random(variant)}  # random in training
AP_LOSSES = {test for test, (entry, _) in _OF.items() if entry.ap}
REDUCIBLE_LOSSES = {test for test, (entry, _) in _OF.items() if entry.takes_reducer}
