"""Every file of the repository that the README, CONTRIBUTING, the docs pages, the benchmarks' RESULTS and the
package's docstrings name (``ranklit/...``, ``tests/...``, ``benchmarks/...``, ``configs/...``, ``docs/...``,
``notebooks/...``, ``.ci/...``) exists: a moved or renamed file cannot leave a stale reference behind."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_PATH = re.compile(
    r"(?<![\w./-])((?:ranklit|tests|benchmarks|configs|docs|notebooks|\.ci)/[\w.-]+(?:/[\w.-]+)*"
    r"\.(?:py|md|yaml|yml|txt|ipynb|json|toml))(?![\w/-])"
)
# Paths named on purpose that are not files of the repository: what a run or a build writes.
_WRITTEN = ("docs/figures/",)
# The toy additions of CONTRIBUTING's recipes (the files a contributor would add): named, not in the repository.
_RECIPE_TOYS = ("mean_positive", "hello_command", "mean_score", "toy_format")


def _texts() -> dict[str, str]:
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "benchmarks" / "RESULTS.md"]
    pages += sorted((ROOT / "docs").rglob("*.md"))
    sources = sorted((ROOT / "ranklit").rglob("*.py")) + sorted((ROOT / "benchmarks").glob("*.py"))
    return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in [*pages, *sources]}


def named_paths(text: str) -> set[str]:
    """The repository paths named in ``text``.

    >>> sorted(named_paths("see `ranklit/index/descriptors.py` and benchmarks/gpu.py, not ranklit.index"))
    ['benchmarks/gpu.py', 'ranklit/index/descriptors.py']
    """
    return {m.group(1).rstrip(".") for m in _PATH.finditer(text)}


def test_every_named_path_exists() -> None:
    missing = [
        f"{source}: {path}"
        for source, text in _texts().items()
        for path in sorted(named_paths(text))
        if not (ROOT / path).exists() and not path.startswith(_WRITTEN) and not any(toy in path for toy in _RECIPE_TOYS)
    ]
    assert not missing, "named but missing (fix the reference or restore the file):\n" + "\n".join(missing)


def test_the_scan_sees_a_missing_path() -> None:
    assert named_paths("moved from `ranklit/landmarks/descriptors.py`") == {"ranklit/landmarks/descriptors.py"}
    assert not (ROOT / "ranklit/landmarks/descriptors.py").exists()
