"""Helpers of the ``ranklit data prepare`` tests: digests, ``--source`` arguments, the command in this process."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.data.prepare.server import Served


def sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def source_args(served: Served, files: dict[str, bytes]) -> list[str]:
    """``--source URL --sha256 HEX`` for each file the server holds under its name."""
    args = []
    for name, content in files.items():
        args += ["--source", f"{served.url}/{name}", "--sha256", sha256(content)]
    return args


def prepare(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``ranklit data prepare ARGS`` in this process: exit code, stdout, stderr."""
    from ranklit.cli import main

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
