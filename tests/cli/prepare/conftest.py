"""Fixtures of the ``ranklit data prepare`` tests: the miniature archives served on 127.0.0.1."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from ranklit.cli.prepare import _download as download
from tests.cli.prepare.archives import MINIATURES
from tests.cli.prepare.server import Served, serving


def sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def source_args(served: Served, files: dict[str, bytes]) -> list[str]:
    """``--source URL --sha256 HEX`` for each file the server holds under its name."""
    args = []
    for name, content in files.items():
        args += ["--source", f"{served.url}/{name}", "--sha256", sha256(content)]
    return args


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries without waiting (the backoff itself is tested on its own)."""
    monkeypatch.setattr(download, "BACKOFF_SECONDS", 0.0)


@pytest.fixture
def cub_served(tmp_path: Path) -> Iterator[tuple[Served, dict[str, bytes]]]:
    files = MINIATURES["cub"](tmp_path / "build")
    with serving(Served(files={f"/{name}": content for name, content in files.items()})) as served:
        yield served, files


def prepare(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``ranklit data prepare ARGS`` in this process: exit code, stdout, stderr."""
    from ranklit.cli.app import main

    try:
        main(["data", "prepare", *args])
        code = 0
    except SystemExit as stop:
        code = int(stop.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def outside(folder: Path, root: Path) -> list[Path]:
    """Every path under ``folder`` but outside ``root`` (what a prepare must not touch)."""
    return sorted(p for p in folder.rglob("*") if root not in p.parents and p != root)
