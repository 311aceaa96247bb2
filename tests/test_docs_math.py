"""The site renders its formulas at build time (docs/mathml.py): every formula of docs/ and of the package's
docstrings converts to MathML, found the way the build finds them (griffe_rst's rewriting of the docstrings, then
Markdown with ``pymdownx.arithmatex``), so a formula the converter does not know fails here, not on the site."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import griffe
import markdown
import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_docs_{name}", ROOT / "docs" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


mathml = _load("mathml")
griffe_rst = _load("griffe_rst")


def _html(text: str) -> str:
    extensions = ["pymdownx.superfences", "pymdownx.arithmatex"]
    return markdown.markdown(text, extensions=extensions, extension_configs={"pymdownx.arithmatex": {"generic": True}})


def _docstrings(obj: griffe.Object) -> list[str]:
    found = [griffe_rst.convert(obj.docstring.value)] if obj.docstring is not None else []
    for member in obj.members.values():
        if not member.is_alias:
            found += _docstrings(member)  # type: ignore[arg-type]
    return found


def _sources() -> dict[str, str]:
    pages = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").rglob("*.md"))}
    package = griffe.load("ranklit", search_paths=[str(ROOT)], resolve_aliases=False)
    return {**pages, "docstrings of ranklit": "\n\n".join(_docstrings(package))}


SOURCES = _sources()


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_every_formula_converts_to_mathml(source: str) -> None:
    formulas = mathml.formulas(_html(SOURCES[source]))
    for tex, display in formulas:
        assert "<math" in mathml.to_mathml(tex, display=display)


def test_the_formulas_are_found_and_rendered() -> None:
    every = [f for text in SOURCES.values() for f in mathml.formulas(_html(text))]
    assert len(every) > 100 and any(display for _, display in every) and any(not display for _, display in every)
    page = _html("A sum $\\sum_q x_q$ and\n\n$$\n\\frac{1}{|Q|}\n$$\n")
    rendered = mathml.render(page)
    assert "arithmatex" in page and "\\(" not in rendered and "\\[" not in rendered
    assert rendered.count("<math") == 2 and 'MathML" display="block">' in rendered


def test_an_unknown_command_is_refused() -> None:
    with pytest.raises(ValueError, match="unknowncommand"):
        mathml.to_mathml("x + \\unknowncommand{y}")
    assert "-0.1667em" in mathml.to_mathml("a\\!b")  # MathML Core has no named spaces: lengths instead
