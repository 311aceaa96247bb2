"""No text a user reads names a config key the CLI refuses: the error messages, docstrings and comments of the
package, the README, CONTRIBUTING, the docs pages and the shipped configs' comments. The refused keys are those of
``ranklit.cli._config_files.RENAMED`` (``ranklit fit`` rejects each with its new place; ``tests/cli/test_cli.py`` checks
that), the one file allowed to name them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from ranklit.cli._config_files import RENAMED

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = {ROOT / "ranklit" / "cli" / "_config_files.py"}


def _texts() -> list[Path]:
    files = [
        *(ROOT / "ranklit").rglob("*.py"),
        ROOT / "README.md",
        ROOT / "CONTRIBUTING.md",
        *(ROOT / "docs").rglob("*.md"),
        *(ROOT / "docs").glob("*.py"),
        *(ROOT / "configs").glob("*.yaml"),
    ]
    return sorted(f for f in files if f not in ALLOWED)


def _current_names() -> set[str]:
    """Every parameter name of the package's functions and every key of the shipped configs."""
    names: set[str] = set()
    for path in (ROOT / "ranklit").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                names.update(a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs])
    for path in (ROOT / "configs").glob("*.yaml"):
        names.update(re.findall(r"^\s*([A-Za-z_]\w*):", path.read_text(encoding="utf-8"), flags=re.MULTILINE))
    return names


def refused_key_pattern() -> re.Pattern[str]:
    """The refused keys as written in a text: the dotted key (``data.test_split``, ``--data.test_split``), or the
    last part alone when it is a compound name no current parameter or config key uses (``multistage_chunk_size``)."""
    current = _current_names()
    leaves = {k.rsplit(".", 1)[1] for k in RENAMED} - current
    words = sorted({*RENAMED, *(leaf for leaf in leaves if "_" in leaf)}, key=len, reverse=True)
    return re.compile(r"(?<![\w.])(" + "|".join(re.escape(w) for w in words) + r")(?!\w)")


PATTERN = refused_key_pattern()


def test_the_pattern_finds_the_old_keys_and_only_them() -> None:
    assert PATTERN.search("ranklit predict --data.test_split train")
    assert PATTERN.search("set `model.multistage_chunk_size: 64`")
    assert PATTERN.search("when ``multistage_chunk_size`` is set")
    assert PATTERN.search("`--data.dataset MyDataset`")
    for current in ("--data.test_dataset.init_args.split", "ranklit.data.datasets", "model.metric.init_args.recall_at"):
        assert not PATTERN.search(current), current


@pytest.mark.parametrize("path", _texts(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_text_names_a_refused_config_key(path: Path) -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: `{match[1]}` is refused by the CLI; write "
        f"{RENAMED.get(match[1], 'its new key (ranklit/cli/_config_files.py)')}"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        for match in PATTERN.finditer(line)
    ]
    assert not found, "\n".join(found)
