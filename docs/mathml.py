"""MkDocs hook: the formulas become MathML when the site is built, so that no page loads a script to show them.

``pymdownx.arithmatex`` (generic mode) leaves each formula as ``<span class="arithmatex">\\(…\\)</span>`` (inline) or
``<div class="arithmatex">\\[…\\]</div>`` (display), on the Markdown pages and in the docstrings mkdocstrings renders.
:func:`on_page_content` replaces each by the MathML of ``latex2mathml``; browsers render MathML natively. A formula the
converter does not understand (it would show a command such as ``\\foo`` as text) fails the build, naming the page.

``tests/test_docs_math.py`` runs :func:`to_mathml` on every formula of docs/ and of the package's docstrings.
"""

from __future__ import annotations

import html
import re
from typing import Any

from latex2mathml.converter import convert

FORMULA = re.compile(
    r'<(?P<tag>span|div) class="arithmatex">\s*(?:\\\((?P<inline>.*?)\\\)|\\\[(?P<display>.*?)\\\])\s*</(?P=tag)>',
    re.DOTALL,
)
# A LaTeX command latex2mathml did not know stays as text in a token element: `<mi>\foo</mi>`.
_UNKNOWN_COMMAND = re.compile(r"<(m[ino]|mtext)[^>]*>(\\[A-Za-z]+)</\1>")
# MathML 3's named spaces, which MathML Core (what browsers implement) dropped: their lengths.
_NAMED_SPACES = {
    "veryverythinmathspace": "0.0556em",
    "verythinmathspace": "0.1111em",
    "thinmathspace": "0.1667em",
    "mediummathspace": "0.2222em",
    "thickmathspace": "0.2778em",
    "verythickmathspace": "0.3333em",
    "veryverythickmathspace": "0.3889em",
}
_NAMED_SPACE = re.compile(r'"(negative)?(' + "|".join(_NAMED_SPACES) + r')"')


def to_mathml(tex: str, *, display: bool = False) -> str:
    """The MathML of one formula (``tex`` as written, without delimiters).

    Raises:
        ValueError: ``tex`` does not parse, or uses a command the converter does not know.
    """
    try:
        mathml = convert(tex.strip(), display="block" if display else "inline")
    except Exception as err:  # latex2mathml raises its own exception types, and IndexError etc. on bad input
        raise ValueError(f"cannot convert the formula {tex!r}: {err}") from err
    if unknown := _UNKNOWN_COMMAND.search(mathml):
        raise ValueError(f"the formula {tex!r} uses {unknown[2]}, which latex2mathml does not know")
    return _NAMED_SPACE.sub(lambda m: f'"{"-" if m[1] else ""}{_NAMED_SPACES[m[2]]}"', mathml)


def formulas(page_html: str) -> list[tuple[str, bool]]:
    """Every formula arithmatex left in ``page_html``: ``(tex, display)``, in order."""
    return [
        (html.unescape(m["display"] if m["display"] is not None else m["inline"]), m["display"] is not None)
        for m in FORMULA.finditer(page_html)
    ]


def render(page_html: str) -> str:
    """``page_html`` with every arithmatex formula replaced by MathML."""

    def replace(match: re.Match[str]) -> str:
        display = match["display"] is not None
        mathml = to_mathml(html.unescape(match["display"] if display else match["inline"]), display=display)
        return f'<{match["tag"]} class="arithmatex">{mathml}</{match["tag"]}>'

    return FORMULA.sub(replace, page_html)


def on_page_content(page_html: str, page: Any, **kwargs: Any) -> str:
    """MkDocs event: convert the formulas of each page once it is rendered to HTML."""
    try:
        return render(page_html)
    except ValueError as err:
        from mkdocs.exceptions import PluginError

        raise PluginError(f"{page.file.src_uri}: {err}") from err
