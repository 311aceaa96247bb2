"""The public modules moved into the domain sub-packages (0.2.0) still import from their old paths until 0.3.0: the
old path is the new module itself, and importing it says where it went (a ``FutureWarning``, shown by default)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ddp import scaled_timeout
from tests.test_public_api import MOVED_MODULES

#: Run by one interpreter for every moved module (one start-up instead of one a module): each old path is imported
#: for the first time in that process, its warnings recorded; one JSON line ``[old, new, same module, warnings]`` each.
_CHECK_ALL = """
import importlib, json, sys, warnings
for old, new in json.loads(sys.argv[1]):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        old_module = importlib.import_module(old)
    new_module = importlib.import_module(new)
    same = old_module is new_module and bool(new_module.__all__) and all(
        getattr(old_module, name) is getattr(new_module, name) for name in new_module.__all__)
    print(json.dumps([old, new, same, [f'{w.category.__name__}: {w.message}' for w in caught]]))
"""


@pytest.fixture(scope="module")
def imported_old_paths() -> dict[tuple[str, str], tuple[bool, list[str]]]:
    """Every old path of ``MOVED_MODULES`` imported (first) in a fresh interpreter: is it the new module, and what
    did its import warn."""
    pairs = json.dumps([list(pair) for pair in MOVED_MODULES])
    result = subprocess.run([sys.executable, "-c", _CHECK_ALL, pairs], capture_output=True, text=True,
                            timeout=scaled_timeout(120))
    assert result.returncode == 0, result.stderr
    return {(old, new): (same, caught) for old, new, same, caught in map(json.loads, result.stdout.splitlines())}


@pytest.mark.parametrize(("old", "new"), MOVED_MODULES)
def test_an_old_module_path_is_the_new_module_and_names_it(
    old: str, new: str, imported_old_paths: dict[tuple[str, str], tuple[bool, list[str]]]
) -> None:
    same, caught = imported_old_paths[(old, new)]
    assert same, (old, new)
    assert caught == [f"FutureWarning: `{old}` is deprecated: use `{new}` (removed in ranklit 0.3.0)."], caught


def test_the_old_from_import_form_works_and_warns_at_the_users_line(tmp_path: Path) -> None:
    script = tmp_path / "user_code.py"
    script.write_text(
        "from ranklit.functional.loss_utils import check_score_masks\nprint(check_score_masks.__module__)\n"
    )
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=scaled_timeout(60), cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ranklit.functional.losses.contract"
    assert f"{script}:1: FutureWarning: `ranklit.functional.loss_utils` is deprecated" in result.stderr, result.stderr
