"""Griffe extension: render the reStructuredText bits of ranklit's Google-style docstrings in Markdown.

The docstrings are read by Sphinx-minded people and by mkdocstrings alike; this turns the few reST constructs they
use into what Markdown (with pymdownx.arithmatex) understands:

- ``:func:`x```, ``:class:`x```, ``:mod:`x```, ``:meth:`x```, ``:attr:`x``` → a link to ``x``'s API entry
  (mkdocs-autorefs; ``x`` is resolved from the docstring's scope, ``~x`` shows the last component only); a target the
  site does not document (a private helper, torch) stays a code span;
- ````literal```` (double back-quotes) → `` `literal` ``;
- ``.. math:: formula`` (inline or as an indented block) → a ``$$ … $$`` display formula;
- a paragraph ending in ``::`` followed by an indented block → a paragraph ending in ``:`` and a fenced code block;
- ``Example:`` → ``Examples:`` (griffe renders the doctest of an ``Examples`` section as code; ``Example`` would be an
  admonition whose ``>>>`` lines are read as Markdown);
- ``a, b, c: text`` in an ``Args:`` section → one entry per parameter, each with the text;
- the plain-text formula that opens a docstring (``summary::`` and an indented block, or a ``.. math::`` paragraph
  right after the summary) is left out when the object's API page shows the formula itself (a ``$$`` display formula
  on the page of ``::: object``): each page shows its formula once, while ``help()`` keeps the docstring's.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import griffe

DOCS = Path(__file__).resolve().parent

_ROLE = re.compile(r":(?:func|class|mod|meth|attr|data|obj|exc|py:\w+):`(?P<short>~?)(?P<name>[^`]+)`")
_DOUBLE_BACKQUOTE = re.compile(r"``([^`]+?)``")
_MATH_INLINE = re.compile(r"^(?P<indent>[ \t]*)\.\. math::[ \t]*(?P<formula>\S.*)$", re.MULTILINE)
_EXAMPLE = re.compile(r"^(?P<indent>[ \t]*)Example:[ \t]*$", re.MULTILINE)
_SECTION = re.compile(r"^(?P<indent>[ \t]*)(?P<title>[A-Z][A-Za-z ]*):[ \t]*$")
_GROUPED = re.compile(r"^(?P<indent>[ \t]+)(?P<names>\w+(?:,[ \t]*\w+)+):(?P<text>.*)$")


def _split_grouped_args(text: str) -> str:
    """``a, b: text`` items of an ``Args:`` section become ``a: text`` and ``b: text`` (with their continuation)."""
    lines = text.split("\n")
    out: list[str] = []
    in_args, section_indent = False, 0
    i = 0
    while i < len(lines):
        line = lines[i]
        section = _SECTION.match(line)
        if section:
            in_args = section["title"] in ("Args", "Arguments", "Parameters")
            section_indent = len(section["indent"])
        elif line.strip() and len(line) - len(line.lstrip()) <= section_indent:
            in_args = False
        grouped = _GROUPED.match(line) if in_args else None
        if not grouped:
            out.append(line)
            i += 1
            continue
        indent = len(grouped["indent"])
        j = i + 1
        while j < len(lines) and lines[j].strip() and len(lines[j]) - len(lines[j].lstrip()) > indent:
            j += 1
        for name in re.split(r",[ \t]*", grouped["names"]):
            out += [f"{grouped['indent']}{name}:{grouped['text']}", *lines[i + 1 : j]]
        i = j
    return "\n".join(out)


def _blocks(text: str) -> str:
    """Turn ``.. math::`` blocks and ``::`` literal blocks into Markdown (formulas and fenced code)."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.rstrip()
        is_math = stripped.strip() == ".. math::"
        is_literal = stripped.endswith("::") and not is_math
        if not (is_math or is_literal):
            out.append(line)
            i += 1
            continue
        indent = len(line) - len(line.lstrip())
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        block: list[str] = []
        while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > indent):
            block.append(lines[j])
            j += 1
        while block and not block[-1].strip():
            block.pop()
        if not block:
            out.append(line)
            i += 1
            continue
        body = textwrap.dedent("\n".join(block))
        pad = " " * indent
        if is_math:
            out += [f"{pad}$$", *[pad + b for b in body.split("\n")], f"{pad}$$", ""]
        else:
            text_part = stripped[:-2].rstrip()
            if text_part.strip():
                out += [text_part + ":", ""]
            out += [f"{pad}```text", *[pad + b for b in body.split("\n")], f"{pad}```", ""]
        i = j
    return "\n".join(out)


def _drop_leading_formula(text: str) -> str:
    """``text`` without the formula block that follows its summary (see the module docstring)."""
    paragraphs = text.split("\n\n")
    if len(paragraphs) < 2:
        return text
    summary, second = paragraphs[0].rstrip(), paragraphs[1]
    if summary.endswith("::") and second.startswith((" ", "\t")):
        summary = summary[:-2].rstrip() + "."
    elif not second.lstrip().startswith(".. math::"):
        return text
    return "\n\n".join([summary, *paragraphs[2:]])


def _role(resolve: Callable[[str], str]) -> Callable[[re.Match[str]], str]:
    """The replacement of a ``:role:`name``` match: an optional autorefs link (a code span when nothing is found)."""

    def replace(match: re.Match[str]) -> str:
        name = match["name"].strip().removesuffix("()")
        shown = name.rsplit(".", 1)[-1] if match["short"] else match["name"]
        try:
            target = resolve(name)
        except Exception:  # griffe's NameResolutionError, or a name of another package
            target = name
        return f'<autoref identifier="{target}" optional><code>{shown}</code></autoref>'

    return replace


def convert(text: str, resolve: Callable[[str], str] | None = None, *, drop_formula: bool = False) -> str:
    """The Markdown form of a docstring written with ranklit's reST habits.

    ``resolve`` turns a name written in a role into the full path of its API entry (default: the name as written);
    ``drop_formula`` leaves out the formula block that opens the docstring.
    """
    if drop_formula:
        text = _drop_leading_formula(text)
    role = _role(resolve or (lambda name: name))
    text = _MATH_INLINE.sub(lambda m: f"{m['indent']}$$\n{m['indent']}{m['formula']}\n{m['indent']}$$", text)
    text = _EXAMPLE.sub(lambda m: f"{m['indent']}Examples:", text)
    text = _split_grouped_args(_blocks(text))
    pieces = re.split(r"(```text\n.*?```)", text, flags=re.DOTALL)  # leave literal blocks untouched
    for k in range(0, len(pieces), 2):
        pieces[k] = _DOUBLE_BACKQUOTE.sub(r"`\1`", _ROLE.sub(role, pieces[k]))
    return "".join(pieces)


def objects_with_page_formula(docs: Path = DOCS) -> set[str]:
    """The objects (``::: path``) whose API page shows a display formula of its own."""
    found: set[str] = set()
    for page in docs.rglob("*.md"):
        text = page.read_text(encoding="utf-8")
        if "$$" in text:
            found.update(re.findall(r"^::: *([\w.]+)", text, flags=re.MULTILINE))
    return found


def _same_object(path: str, target: str) -> bool:
    """Whether ``target`` (``pkg.Name``, a re-export) names the object defined at ``path`` (``pkg.module.Name``)."""
    package, _, name = target.rpartition(".")
    return path == target or (path.startswith(f"{package}.") and path.rpartition(".")[2] == name)


def _walk(obj: griffe.Object) -> Iterator[griffe.Object]:
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _walk(member)  # type: ignore[arg-type]


class RstToMarkdown(griffe.Extension):
    """Rewrite every docstring once the whole package is loaded (see the module docstring)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        with_formula = objects_with_page_formula()
        for obj in _walk(pkg):
            if obj.docstring is None:
                continue
            drop = any(_same_object(obj.path, target) for target in with_formula)
            obj.docstring.value = convert(obj.docstring.value, obj.resolve, drop_formula=drop)
