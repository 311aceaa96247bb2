"""Fixtures of the ``ranklit data prepare`` tests: the miniature archives served on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ranklit.data.prepare import _download as download
from tests.data.prepare.archives import MINIATURES
from tests.data.prepare.server import Served, serving


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries without waiting (the backoff itself is tested on its own)."""
    monkeypatch.setattr(download, "BACKOFF_SECONDS", 0.0)


@pytest.fixture
def cub_served(tmp_path: Path) -> Iterator[tuple[Served, dict[str, bytes]]]:
    files = MINIATURES["cub"](tmp_path / "build")
    with serving(Served(files={f"/{name}": content for name, content in files.items()})) as served:
        yield served, files
