"""The public modules moved into the domain sub-packages (0.2.0) still import from their old paths until 0.3.0: the
old path is the new module itself, and importing it says where it went (a ``FutureWarning``, shown by default)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.ddp import scaled_timeout
from tests.test_public_api import MOVED_MODULES


@pytest.mark.parametrize(("old", "new"), MOVED_MODULES)
def test_an_old_module_path_is_the_new_module_and_names_it(old: str, new: str) -> None:
    code = (
        "import importlib, warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        f"    old = importlib.import_module({old!r})\n"
        f"new = importlib.import_module({new!r})\n"
        "assert old is new, (old, new)\n"
        "assert new.__all__ and all(getattr(old, name) is getattr(new, name) for name in new.__all__)\n"
        "print('|'.join(f'{w.category.__name__}: {w.message}' for w in caught))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=scaled_timeout(60))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        f"FutureWarning: `{old}` is deprecated: use `{new}` (removed in ranklit 0.3.0)."
    ), result.stdout


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
