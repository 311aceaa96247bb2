"""Griffe extension: render the reStructuredText bits of ranklit's Google-style docstrings in Markdown.

The docstrings are read by Sphinx-minded people and by mkdocstrings alike; this turns the few reST constructs they
use into what Markdown (with pymdownx.arithmatex) understands:

- ``:func:`x```, ``:class:`x```, ``:mod:`x```, ``:meth:`x```, ``:attr:`x``` → a code span `` `x` ``;
- ````literal```` (double back-quotes) → `` `literal` ``;
- ``.. math:: formula`` (inline or as an indented block) → a ``$$ … $$`` display formula;
- a paragraph ending in ``::`` followed by an indented block → a paragraph ending in ``:`` and a fenced code block;
- ``Example:`` → ``Examples:`` (griffe renders the doctest of an ``Examples`` section as code; ``Example`` would be an
  admonition whose ``>>>`` lines are read as Markdown);
- ``a, b, c: text`` in an ``Args:`` section → one entry per parameter, each with the text.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import griffe

_ROLE = re.compile(r":(?:func|class|mod|meth|attr|data|obj|exc|py:\w+):`~?([^`]+)`")
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


def convert(text: str) -> str:
    """The Markdown form of a docstring written with ranklit's reST habits."""
    text = _MATH_INLINE.sub(lambda m: f"{m['indent']}$$\n{m['indent']}{m['formula']}\n{m['indent']}$$", text)
    text = _EXAMPLE.sub(lambda m: f"{m['indent']}Examples:", text)
    text = _split_grouped_args(_blocks(text))
    pieces = re.split(r"(```text\n.*?```)", text, flags=re.DOTALL)  # leave literal blocks untouched
    for k in range(0, len(pieces), 2):
        pieces[k] = _DOUBLE_BACKQUOTE.sub(r"`\1`", _ROLE.sub(r"`\1`", pieces[k]))
    return "".join(pieces)


class RstToMarkdown(griffe.Extension):
    """Rewrite every docstring once it is loaded (see the module docstring)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = convert(obj.docstring.value)
