"""The line the command prints for an exception whose fix is the user's (ranklit.cli._errors._causes), case by case."""

from __future__ import annotations

import pickle
import socket

import pytest

from ranklit.cli._errors._causes import user_message, worker_message
from ranklit.errors import UserError
from ranklit.models._pretrained import create_pretrained, hub_reachable


def _worker_error(message: str) -> ValueError:
    """An error as PyTorch re-raises it in the main process after a loader worker raised ``UserError(message)``."""
    from torch._utils import ExceptionWrapper

    try:
        try:
            raise ValueError("truncated")
        except ValueError as cause:
            raise UserError(message) from cause
    except UserError:
        wrapper = ExceptionWrapper(where="in DataLoader worker process 3")
    try:
        wrapper.reraise()
    except UserError as error:
        return error
    raise AssertionError("reraise always raises")


def test_a_loader_worker_error_is_the_original_message_only() -> None:
    error = _worker_error("Could not decode image a.jpg: cut.\n  - and a second line")
    assert str(error).startswith("Caught UserError in DataLoader worker process 3")  # what reached the user before
    assert user_message(error) == "Could not decode image a.jpg: cut.\n  - and a second line"
    assert worker_message("a plain message") == "a plain message"


def test_permissions_read_only_folders_and_refused_checkpoints_are_user_errors() -> None:
    denied = PermissionError(13, "Permission denied", "runs")
    assert user_message(denied).startswith("runs: Permission denied. ranklit reads the data and configs and writes")
    read_only = OSError(30, "Read-only file system", "predictions")
    assert "run from a writable folder" in user_message(read_only)
    refused = pickle.UnpicklingError("Weights only load failed.\nTrying to load unsupported GLOBAL posix.system.")
    assert user_message(refused) == (
        "refused to load a checkpoint that names code to run (Trying to load unsupported GLOBAL posix.system): "
        "unpickling it could execute that code. Use a checkpoint written by ranklit, from a source you trust."
    )
    assert user_message(RuntimeError("a bug")) is None  # keeps its traceback


def test_hub_probe_says_whether_a_connection_opens() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)  # the kernel completes the connection from the backlog: no accept() needed
    port = server.getsockname()[1]
    assert hub_reachable(("127.0.0.1", port), timeout=5)
    server.close()
    assert not hub_reachable(("127.0.0.1", port), timeout=1)


def _timm_reaches_the_hub() -> bool:
    from timm.models._hub import has_hf_hub  # timm 1.0.10 cannot import huggingface_hub >= 1.0 (it then refuses)

    return bool(has_hf_hub())


@pytest.mark.skipif(not _timm_reaches_the_hub(), reason="this timm cannot use the installed huggingface_hub")
def test_pretrained_weights_without_network_fail_at_once(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No connection to the Hub (the probe fails): no download is tried, the empty cache says so in one line."""
    monkeypatch.setattr("ranklit.models._pretrained.hub_reachable", lambda *args, **kwargs: False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))  # an empty cache (any timm version)
    with pytest.raises(UserError, match=r"backbone 'resnet10t': pretrained weights could not be downloaded: set "
                                        r"model.net.init_args.pretrained false .*; no connection to huggingface.co\."):
        create_pretrained("resnet10t")
