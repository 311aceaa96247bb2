"""Downloads against a local server: a drop resumed with HTTP Range, a re-run continuing a ``.part``, HTTP errors,
an unreachable server, a server without Range support, a web page instead of the file, a full disk."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import namedtuple
from pathlib import Path

import pytest

from tests.cli.cli_cases import drive
from tests.data.prepare.archives import MINIATURES
from tests.data.prepare.helpers import prepare, sha256, source_args
from tests.data.prepare.server import Served, serving
from tests.ddp import default_signals, scaled_timeout

_MIB = 1 << 20


@pytest.fixture
def big_cub(tmp_path: Path) -> tuple[str, bytes]:
    """A CUB miniature of about 3 MiB (three read chunks), as ``(name, content)``."""
    ((name, content),) = MINIATURES["cub"](tmp_path / "build", padding=3 * _MIB).items()
    return name, content


def _cub(served: Served, name: str, content: bytes, root: Path, *extra: str) -> list[str]:
    return ["cub", "--root", str(root), "--source", f"{served.url}/{name}", "--sha256", sha256(content), *extra]


def test_a_dropped_connection_is_resumed_with_range_for_less_than_1_6_times_the_bytes(
    tmp_path, big_cub, capsys, no_backoff
) -> None:
    name, content = big_cub
    with serving(Served(files={f"/{name}": content}, drops={f"/{name}": [len(content) // 2]})) as served:
        code, _, err = prepare(capsys, *_cub(served, name, content, tmp_path / "cub", "--no-progress"))
    assert code == 0, err
    assert served.ranges == [None, f"bytes={len(content) // 2}-"]
    assert served.body_bytes < 1.6 * len(content)
    assert (tmp_path / "cub" / "images").is_dir()


def test_a_rerun_continues_the_part_file_of_an_interrupted_download(tmp_path, big_cub, capsys, no_backoff) -> None:
    name, content = big_cub
    # the second answer closes at once: no progress, and with --retries 0 the command gives up
    with serving(Served(files={f"/{name}": content}, drops={f"/{name}": [_MIB + 5, 0]})) as served:
        args = _cub(served, name, content, tmp_path / "cub", "--no-progress", "--retries", "0")
        code, _, err = prepare(capsys, *args)
        part = tmp_path / ".cub.downloads" / f"{name}.part"
        assert code == 2 and f"kept in {part}: run the same command to continue" in err
        assert part.stat().st_size == _MIB + 5 and not (tmp_path / "cub").exists()
        code, _, err = prepare(capsys, *args)
    assert code == 0, err
    assert served.ranges == [None, f"bytes={_MIB + 5}-", f"bytes={_MIB + 5}-"]
    assert served.body_bytes == len(content)
    assert not (tmp_path / ".cub.downloads").exists()


def test_a_server_that_ignores_range_is_read_again_from_the_start(tmp_path, big_cub, capsys, no_backoff) -> None:
    name, content = big_cub
    served_files = Served(files={f"/{name}": content}, drops={f"/{name}": [_MIB]}, ignore_range=True)
    with serving(served_files) as served:
        code, _, err = prepare(capsys, *_cub(served, name, content, tmp_path / "cub", "--no-progress"))
    assert code == 0, err  # the digest matched: the file was not the first MiB twice
    assert served.body_bytes == _MIB + len(content)


@pytest.mark.parametrize(("status", "tries"), [(404, 1), (403, 1), (500, 3), (503, 3)])
def test_http_errors_are_one_line_and_exit_2_server_errors_after_the_retries(
    tmp_path, capsys, no_backoff, status, tries
) -> None:
    with serving(Served(status={"/CUB_200_2011.tgz": status})) as served:
        code, _, err = prepare(capsys, "cub", "--root", str(tmp_path / "cub"), "--retries", "2",
                                 "--source", f"{served.url}/CUB_200_2011.tgz")
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and f"HTTP {status}" in err
    assert f"{served.url}/CUB_200_2011.tgz" in err
    assert len(served.ranges) == tries
    assert not (tmp_path / "cub").exists()


def test_an_unreachable_server_is_one_line_and_exit_2(tmp_path, capsys, no_backoff) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code, _, err = prepare(capsys, "cub", "--root", str(tmp_path / "cub"), "--retries", "1",
                           "--source", f"http://127.0.0.1:{port}/CUB_200_2011.tgz")
    assert code == 2
    assert err.count("\n") == 1 and "refused" in err.lower() and "2 failed tries" in err


def test_the_backoff_doubles_between_tries(tmp_path, capsys, monkeypatch) -> None:
    waits: list[float] = []
    monkeypatch.setattr("time.sleep", waits.append)
    with serving(Served(status={"/CUB_200_2011.tgz": 503})) as served:
        code, _, _ = prepare(capsys, "cub", "--root", str(tmp_path / "cub"), "--retries", "3",
                             "--source", f"{served.url}/CUB_200_2011.tgz")
    assert code == 2 and waits == [1.0, 2.0, 4.0]


def test_a_web_page_instead_of_the_file_says_to_download_it_by_hand(tmp_path, capsys) -> None:
    page = b"<html>Google Drive can't scan this file for viruses</html>"
    with serving(Served(files={"/uc": page}, content_type="text/html; charset=utf-8")) as served:
        code, _, err = prepare(capsys, "cub", "--root", str(tmp_path / "cub"), "--source", f"{served.url}/uc")
    assert code == 2 and "answered with a web page" in err and "--source PATH" in err


def test_a_full_disk_stops_before_any_byte_is_kept(tmp_path, big_cub, capsys, monkeypatch) -> None:
    name, content = big_cub
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage(10 * _MIB, 9 * _MIB, _MIB))
    with serving(Served(files={f"/{name}": content})) as served:
        code, _, err = prepare(capsys, *_cub(served, name, content, tmp_path / "cub"))
    assert code == 2 and "not enough free disk space" in err and "1.0 MiB are free" in err
    assert len(served.ranges) == 1  # one request, its headers read, its body not
    assert not list((tmp_path / ".cub.downloads").iterdir()) and not (tmp_path / "cub").exists()


@pytest.mark.slow
def test_the_command_prints_one_line_for_a_404_and_an_unknown_name(tmp_path) -> None:
    with serving(Served()) as served:
        missing, unknown = drive([
            ["data", "prepare", "cub", "--root", str(tmp_path / "r"), "--source", f"{served.url}/missing.tgz"],
            ["data", "prepare", "cubb", "--root", str(tmp_path / "r")],
        ], tmp_path)
    error = missing["stderr"]
    assert missing["returncode"] == 2 and error.count("\n") == 1 and "HTTP 404" in error, error
    error = unknown["stderr"]
    assert unknown["returncode"] == 2 and error.startswith("error: unknown dataset 'cubb'"), error
    assert error.count("\n") == 1


@pytest.mark.slow
def test_ctrl_c_during_a_download_keeps_the_part_and_the_same_command_continues(tmp_path, big_cub, capsys) -> None:
    """The user's day: a slow download, Ctrl-C (one line, exit 130, no root), the same command again."""
    name, content = big_cub
    root = tmp_path / "cub"
    with serving(Served(files={f"/{name}": content}, throttle=0.05)) as served:
        args = _cub(served, name, content, root, "--no-progress")
        command = [sys.executable, "-m", "ranklit.cli", "data", "prepare", *args]
        running = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   preexec_fn=default_signals)
        part = tmp_path / ".cub.downloads" / f"{name}.part"
        deadline = time.monotonic() + 120
        while not (part.exists() and part.stat().st_size > 0) and time.monotonic() < deadline:
            time.sleep(0.05)
        running.send_signal(signal.SIGINT)
        _, err = running.communicate(timeout=scaled_timeout(60))
        assert running.returncode == 130 and err.startswith("interrupted: nothing was moved into --root"), err
        assert err.count("\n") == 1 and not root.exists()
        held = part.stat().st_size
        assert 0 < held < len(content)
        served.throttle = 0.0
        code, _, err = prepare(capsys, *args)
    assert code == 0, err
    assert served.ranges[-1] == f"bytes={held}-"
    assert served.body_bytes < 1.6 * len(content)
    assert (root / "images").is_dir()


def test_downloaded_archives_are_deleted_once_prepared_unless_kept(tmp_path, capsys, cub_served) -> None:
    served, files = cub_served
    for keep, root in (([], tmp_path / "a" / "cub"), (["--keep-archives"], tmp_path / "b" / "cub")):
        code, _, err = prepare(capsys, "cub", "--root", str(root), *source_args(served, files), *keep)
        assert code == 0, err
        kept = root.parent / ".cub.downloads" / "CUB_200_2011.tgz"
        assert (kept.read_bytes() == files["CUB_200_2011.tgz"]) if keep else not kept.parent.exists()
