"""Issue 47, item 3: an old path of a moved name says where it went (``ranklit/_moved.py``), through both doors (an
import statement, an attribute), for every row of the table; a name that never existed keeps Python's own error."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from ranklit._moved import MOVED
from tests.ddp import scaled_timeout


def _resolve(path: str) -> object:
    """The object at ``path`` (a module, or a module's attribute)."""
    try:
        return importlib.import_module(path)
    except ImportError:
        module, _, name = path.rpartition(".")
        return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_every_old_path_names_its_new_one_and_the_new_one_exists(old: str, new: str) -> None:
    assert _resolve(new) is not None
    module, _, name = old.rpartition(".")
    expected = f"`{old}` has moved: it is `{new}` now."
    with pytest.raises(ImportError) as imported:
        exec(f"from {module} import {name}", {})  # the statement a user's code holds
    assert str(imported.value) == expected
    package = importlib.import_module(module)
    with pytest.raises(AttributeError) as attribute:
        getattr(package, name)
    assert str(attribute.value) == expected
    assert not hasattr(package, name)  # hasattr / getattr(..., default) behave as before


def test_a_name_that_never_existed_keeps_pythons_error() -> None:
    import ranklit.data

    with pytest.raises(AttributeError, match=r"module 'ranklit\.data' has no attribute 'NoSuchName'"):
        ranklit.data.NoSuchName  # noqa: B018
    with pytest.raises(ImportError, match="cannot import name 'NoSuchName'"):
        exec("from ranklit.models import NoSuchName", {})
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("ranklit.no_such_module")


def test_the_issues_import_as_a_user_runs_it() -> None:
    result = subprocess.run([sys.executable, "-c", "from ranklit.data import RevisitedLandmarks"], capture_output=True,
                            text=True, timeout=scaled_timeout(120))
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last == ("ImportError: `ranklit.data.RevisitedLandmarks` has moved: it is "
                    "`ranklit.landmarks.RevisitedLandmarks` now."), result.stderr
