"""The fixtures of the fault-injection tests (:mod:`tests.callbacks.faults_harness`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.built_once import built_once
from tests.callbacks.faults_harness import run


@pytest.fixture(scope="session")
def references(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], Path]:
    """The uninterrupted run of each (launcher, workers), made on first use (shared by the test modules and the
    workers: :mod:`tests.built_once`)."""

    def build(key: tuple[str, int], folder: Path) -> None:
        result = run(folder, *key)
        assert result.returncode == 0, result.stderr[-3000:]

    class _Lazy(dict):
        def __missing__(self, key: tuple[str, int]) -> Path:
            self[key] = built_once(tmp_path_factory, f"reference-{key[0]}-{key[1]}", lambda f: build(key, f))
            return self[key]

    return _Lazy()
