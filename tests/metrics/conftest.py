"""Fixtures of the metric tests."""

from __future__ import annotations

import pytest

from ranklit.functional.metrics import _counting


@pytest.fixture(params=["passes", "items"])
def counting(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Force one way of counting the items at or above each positive on CPU: a comparison pass per threshold
    (``"passes"``), or finding the items that clear the lowest threshold and placing them (``"items"``). Which one the
    cost estimate picks must never change a value."""
    if request.param == "passes":
        monkeypatch.setattr(_counting, "_FIND_COST", float("inf"))
    else:
        for cost in ("_FIND_COST", "_PLACE_BASE", "_PLACE_PER_THRESHOLD"):
            monkeypatch.setattr(_counting, cost, 0.0)
    return str(request.param)
