"""The fixtures of the fault-injection tests (:mod:`tests.callbacks.faults_harness`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.callbacks.faults_harness import run


@pytest.fixture(scope="session")
def references(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], Path]:
    """The uninterrupted run of each (launcher, workers), made on first use (shared by the test modules)."""

    class _Lazy(dict):
        def __missing__(self, key: tuple[str, int]) -> Path:
            folder = tmp_path_factory.mktemp(f"reference-{key[0]}-{key[1]}")
            result = run(folder, *key)
            assert result.returncode == 0, result.stderr[-3000:]
            self[key] = folder
            return folder

    return _Lazy()
