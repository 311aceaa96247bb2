"""Pretrained timm weights with no network: one line at once, instead of a minute of download retries.

``timm.create_model(name, pretrained=True)`` downloads the weights from the Hugging Face Hub (or a URL) unless they
are in the cache (``HF_HOME``, default ``~/.cache/huggingface``; ``TORCH_HOME`` for URL weights). Without a network,
``huggingface_hub`` retries each request with back-off for about 50 s before it gives up, and the run is built before
the datasets whose errors would come first. :func:`create_pretrained` first tries a TCP connection to the Hub
(``HUB_PROBE_SECONDS`` at most); when it fails (or ``HF_HUB_OFFLINE`` is set), timm runs with the Hub in offline
mode (``huggingface_hub.constants.HF_HUB_OFFLINE``, the value its ``HF_HUB_OFFLINE`` environment variable sets), so
cached weights still load and missing ones fail at once, as one :class:`~ranklit.errors.UserError` line.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import timm
from torch import nn

from ranklit.errors import UserError

__all__ = ["HUB", "HUB_PROBE_SECONDS", "create_pretrained", "hub_reachable"]

HUB = ("huggingface.co", 443)
HUB_PROBE_SECONDS = 3.0
NO_WEIGHTS = (
    "pretrained weights could not be downloaded: set model.net.init_args.pretrained false or pre-download to the cache"
)


def hub_reachable(address: tuple[str, int] = HUB, timeout: float = HUB_PROBE_SECONDS) -> bool:
    """Whether a TCP connection to ``address`` opens within ``timeout`` seconds (name lookup included)."""
    try:
        socket.create_connection(address, timeout=timeout).close()
    except OSError:
        return False
    return True


@contextmanager
def _hub_offline() -> Iterator[None]:
    import huggingface_hub.constants as hub  # timm's dependency; read by every download call

    saved, hub.HF_HUB_OFFLINE = hub.HF_HUB_OFFLINE, True
    try:
        yield
    finally:
        hub.HF_HUB_OFFLINE = saved


def create_pretrained(name: str, **kwargs: Any) -> nn.Module:
    """``timm.create_model(name, pretrained=True, **kwargs)``, failing at once without a network (module docstring).

    Raises:
        UserError: no network (or ``HF_HUB_OFFLINE``) and the weights are not in the cache.
    """
    forced = os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE")
    offline = forced or not hub_reachable()
    try:
        with _hub_offline() if offline else nullcontext():
            return timm.create_model(name, pretrained=True, **kwargs)
    except OSError as error:
        if not offline:
            raise
        why = "HF_HUB_OFFLINE is set" if forced else f"no connection to {HUB[0]}"
        cache = os.environ.get("HF_HOME", "~/.cache/huggingface")
        raise UserError(f"backbone {name!r}: {NO_WEIGHTS} ({cache}); {why}. Or load them from a local file with "
                        "model.net.init_args.weights (the docs' Offline page).") from error
