"""The layout's dependency arrows (README "Layout", docs/api/index.md): checked statically on the import statements
of the source (``ast``: every import, at module level or inside a function), and, for the promise users rely on, by
importing in a fresh process."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ddp import scaled_timeout

PACKAGE = Path(__file__).resolve().parents[1] / "ranklit"
# import no ranklit package, only one another (ranklit._checks raises ranklit.errors.UserError, ranklit._lazy's
# missing names are ranklit._moved's)
HELPERS = {
    "ranklit._checks",
    "ranklit.errors",
    "ranklit._deprecation",
    "ranklit._lazy",
    "ranklit._moved",
    "ranklit._public",
    "ranklit._checkpoint",
    "ranklit._injected",
    "ranklit._locks",
    "ranklit._agent",
}
INDEX = PACKAGE.parent / "docs" / "api" / "index.md"  # the table of the packages and what each imports
# the smooth-rank losses' Triton engine imports triton (shipped with torch's Linux CUDA wheels) inside its functions,
# where it runs: ranklit imports without it (docs/spec.md "Engines")
TRITON_ENGINE = tuple(f"ranklit.functional._kernels.{m} imports triton" for m in ("_rank_engine", "_rank_sum_kernels"))


def _imports(path: Path) -> set[str]:
    """The absolute module names ``path`` imports (``from a.b import c`` gives ``a.b`` and ``a.b.c``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: a relative import (the package uses absolute ones)"
            assert node.module is not None
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _module(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")


SOURCES = {_module(path): _imports(path) for path in sorted(PACKAGE.rglob("*.py"))}


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _offending(modules: str, allowed: object) -> list[str]:
    """``module imports name`` for each import of the modules under ``modules`` that ``allowed(name)`` refuses."""
    return [
        f"{module} imports {name}"
        for module, names in SOURCES.items()
        if _within(module, modules)
        for name in sorted(names)
        if not allowed(name)  # type: ignore[operator]
    ]


def test_the_checks_see_the_whole_package() -> None:
    assert {"ranklit.cli._app", "ranklit.callbacks._resume", "ranklit.functional.metrics._retrieval"} <= set(SOURCES)
    assert "ranklit.cli._app" in SOURCES["ranklit.cli"]  # `from ranklit.cli._app import ...` is seen


def _package(module: str) -> str:
    """``ranklit.data`` for ``ranklit.data.datasets._cub``; ``ranklit`` for the top-level helpers."""
    parts = module.split(".")
    top_level = len(parts) < 2 or parts[1].startswith("_") or (PACKAGE / f"{parts[1]}.py").is_file()
    return "ranklit" if top_level else ".".join(parts[:2])


def test_a_private_module_is_imported_from_its_own_package_only() -> None:
    """``_`` means private to its package: another package imports the public names (its ``__init__``'s or a public
    module's), never a ``_`` module. The top-level helpers (``ranklit._compat``, ``ranklit._checks``, ...) belong to
    the whole of ranklit."""
    found = [
        f"{module} imports {name}"
        for module, names in SOURCES.items()
        for name in sorted(names)
        if _within(name, "ranklit")
        and _package(name) not in ("ranklit", _package(module))
        and any(part.startswith("_") for part in name.split(".")[2:])
    ]
    assert not found, "import the package's public name instead (export it from its __init__ if need be)"
    assert _package("ranklit.data.datasets._cub") == "ranklit.data"
    assert _package("ranklit._compat.lightning") == _package("ranklit.errors") == "ranklit"


def test_nothing_imports_the_command_line() -> None:
    assert not [
        f"{module} imports {name}"
        for module, names in SOURCES.items()
        if not _within(module, "ranklit.cli")
        for name in names
        if _within(name, "ranklit.cli")
    ]


def _stdlib(name: str) -> bool:
    return name.split(".")[0] in sys.stdlib_module_names


def test_functional_imports_torch_only() -> None:
    """Plus the standard library and the dependency-free top-level helpers: no numpy, no files on disk (the descriptor
    shards are :mod:`ranklit.index`). Triton, which ships with PyTorch's Linux CUDA wheels, for the CUDA kernels:
    their modules import without it, and the torch path runs where it is missing."""

    def allowed(name: str) -> bool:
        return (
            _stdlib(name)
            or name.split(".")[0] == "torch"
            or name.split(".")[0] == "triton"
            or _within(name, "ranklit.functional")
            or any(_within(name, helper) for helper in HELPERS)
        )

    assert not [o for o in _offending("ranklit.functional", allowed) if not o.startswith(TRITON_ENGINE)]


def test_data_imports_lightning_only_in_the_datamodule() -> None:
    found = [o for o in _offending("ranklit.data", lambda n: not _within(n, "lightning")) if "datamodule " not in o]
    assert not found


@pytest.mark.parametrize(
    "layer",
    ["ranklit.functional", "ranklit.losses", "ranklit.metrics", "ranklit.data", "ranklit.index", "ranklit.landmarks"],
)
def test_the_lower_layers_do_not_import_the_callbacks(layer: str) -> None:
    assert not _offending(layer, lambda n: not _within(n, "ranklit.callbacks"))


def test_the_top_level_helpers_import_nothing_of_ranklit() -> None:
    for helper in HELPERS:
        others = [name for name in SOURCES[helper]
                  if _within(name, "ranklit") and not any(_within(name, other) for other in HELPERS)]
        assert not others, helper


def _table() -> dict[str, set[str]]:
    """``package: the ranklit packages it may import`` from the table of docs/api/index.md."""
    rows = re.findall(r"^\| \[`(ranklit\.\w+)`\]\([^)]*\) \| [^|]* \| ([^|]*) \|", INDEX.read_text(), flags=re.M)
    return {package: {f"ranklit.{name}" for name in re.findall(r"`(\w+)`", imports)} for package, imports in rows}


def test_the_api_index_says_what_each_package_imports() -> None:
    table = _table()
    packages = {name for name in SOURCES if name.count(".") == 1 and (PACKAGE / name.split(".")[1]).is_dir()}
    assert set(table) == packages - {"ranklit._compat"}, "a package without its row in docs/api/index.md"
    for package, allowed in table.items():
        if package == "ranklit.cli":
            continue  # "everything"
        homes = {package, *allowed, *HELPERS}
        found = _offending(package, lambda n, ok=homes: not _within(n, "ranklit") or any(_within(n, h) for h in ok))
        assert not found, f"docs/api/index.md does not list what these import: {found}"


CORE = ("ranklit.functional", "ranklit.losses", "ranklit.metrics", "ranklit.index", "ranklit.landmarks")
READERS = ("ranklit.landmarks._datasets", "ranklit.landmarks._evaluation_set")  # the `train` extra, imported lazily


def test_the_core_imports_the_core_install_only() -> None:
    """The core install (torch, torchmetrics, numpy) is enough for the losses, the metrics and the landmark metric:
    their modules import nothing else (``matplotlib`` only inside ``RetrievalMetrics.plot``, the ``viz`` extra;
    ``triton``, part of PyTorch's Linux CUDA wheels, only where its absence is handled)."""

    def allowed(name: str) -> bool:
        top = name.split(".")[0]
        return (
            _stdlib(name)
            or top in ("torch", "torchmetrics", "numpy", "matplotlib", "triton")
            or any(_within(name, home) for home in (*CORE, *HELPERS, "ranklit._compat.torchmetrics"))
        )

    found = [o for package in CORE for o in _offending(package, allowed)]
    found = [o for o in found if not o.startswith((*READERS, *TRITON_ENGINE))]
    assert not found
    code = (
        "import sys, ranklit.losses, ranklit.metrics, ranklit.functional, ranklit.index, ranklit.landmarks; "
        "bad = [m for m in ('lightning', 'timm', 'jsonargparse', 'yaml', 'wandb') if m in sys.modules]; "
        "assert not bad, bad"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=scaled_timeout(120))
    assert result.returncode == 0, result.stderr


def test_losses_metrics_and_data_do_not_import_lightning() -> None:
    """The layout promise: a user who wants only a loss, a metric or a dataset does not pull in Lightning."""
    code = (
        "import sys, ranklit.losses, ranklit.metrics, ranklit.functional, ranklit.data, "
        "ranklit.data.images.transforms; bad = [m for m in ('lightning', 'pytorch_lightning') if m in sys.modules]; "
        "assert not bad, bad"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=scaled_timeout(120))
    assert result.returncode == 0, result.stderr


def test_triton_is_imported_inside_functions_only() -> None:
    """``import ranklit.functional`` works where Triton does not import (macOS, Windows, CPU-only wheels)."""
    for module in ("_rank_engine", "_rank_sum_kernels"):
        tree = ast.parse((PACKAGE / "functional" / "_kernels" / f"{module}.py").read_text(encoding="utf-8"))
        top = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
        assert not [node for node in top if "triton" in ast.unparse(node)], module


def _module_graph() -> dict[str, set[str]]:
    """``module -> the ranklit modules it imports``: ``from a.b import c`` is an arrow to ``a.b.c`` when that is a
    module (Python runs ``a.b``'s ``__init__`` first, but that one never needs ``c``'s importer), else to ``a.b``."""
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module, arrows = _module(path), set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                arrows.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module is not None:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    arrows.add(full if full in SOURCES else node.module)
        graph[module] = {name for name in arrows if _within(name, "ranklit") and name in SOURCES} - {module}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph`` (strongly connected groups of more than one module), by Tarjan's algorithm."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_through_others() -> None:
    """No import circle between modules, at module level or inside a function (a package's ``__init__`` importing
    its own modules is not one: they never import the ``__init__`` back)."""
    assert not _circles(_module_graph())
    assert _circles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
