"""The import paths that moved in 0.2.0 (``ranklit._moved``): each old path gives the identical object with one
``DeprecationWarning`` naming the new path and the release that removes it; the new paths warn about nothing."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

from ranklit._moved import MODULES, NAMES, REMOVED_IN

OLD_NAMES = sorted((package, name) for package, names in NAMES.items() for name in names)


def _forget(old: str) -> None:
    """Make ``old`` unimported again (an earlier test may have imported it)."""
    sys.modules.pop(old, None)
    parent, _, child = old.rpartition(".")
    vars(sys.modules[parent]).pop(child, None)


def _expected(old: str, new: str) -> str:
    return f"`{old}` moved to `{new}`; the old path will be removed in ranklit {REMOVED_IN}."


@pytest.mark.parametrize("old", sorted(MODULES))
def test_an_old_module_path_is_the_new_module_with_one_warning(old: str) -> None:
    new = importlib.import_module(MODULES[old])
    _forget(old)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
        again = importlib.import_module(old)
    assert module is new and again is new
    assert module.__spec__ is not None and module.__spec__.name == MODULES[old]  # the alias left the module intact
    assert [str(w.message) for w in caught] == [_expected(old, MODULES[old])]
    assert caught[0].category is DeprecationWarning and caught[0].filename == __file__  # points at the importer


@pytest.mark.parametrize(("package", "name"), OLD_NAMES)
def test_an_old_name_is_the_new_object_with_one_warning(package: str, name: str) -> None:
    new = getattr(importlib.import_module(NAMES[package][name]), name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        namespace: dict[str, object] = {}
        exec(compile(f"from {package} import {name}", __file__, "exec"), namespace)
    assert namespace[name] is new
    assert [str(w.message) for w in caught] == [_expected(f"{package}.{name}", f"{NAMES[package][name]}.{name}")]
    assert caught[0].category is DeprecationWarning and caught[0].filename == __file__


def test_other_names_are_still_missing() -> None:
    import ranklit.training

    with pytest.raises(AttributeError, match="no attribute 'NoSuchThing'"):
        _ = ranklit.training.NoSuchThing
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("ranklit.training.no_such_module")


def test_the_new_paths_warn_about_nothing_moved() -> None:
    """Every module of the package imported fresh, in a process of its own: no moved-path warning."""
    code = (
        "import pkgutil, importlib, warnings, ranklit\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    for info in pkgutil.walk_packages(ranklit.__path__, 'ranklit.'):\n"
        "        if not info.name.endswith('__main__'):\n"
        "            importlib.import_module(info.name)\n"
        "print([str(w.message) for w in caught if ' moved to `ranklit.' in str(w.message)])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "[]"
