"""The docs name ranklit's objects by checked references: a ``ranklit.*`` code span on a page is a link.

A span written as [`ranklit.data.PKSampler`][ranklit.data.PKSampler] (mkdocs-autorefs, resolved against the
objects mkdocstrings renders) or [`ranklit.losses`](api/losses/index.md) (a page) makes ``mkdocs build --strict``
fail when the object or page moves; a bare `ranklit.data.PKSampler` would silently go stale. At most a few bare
spans stay: internal modules, which no page documents.
"""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
BARE = re.compile(r"(?<!\[)`(ranklit(?:\.\w+)+)(?:\(\))?`(?!\]\[|\]\()")
FENCE = re.compile(r"```.*?```", re.S)


def bare_spans(text: str) -> list[str]:
    """The ``ranklit.*`` code spans of a page's text that are not links (fenced code blocks left out).

    Example:
        >>> bare_spans("[`ranklit.data.PKSampler`][ranklit.data.PKSampler], `ranklit.cli._app`, `x.y`")
        ['ranklit.cli._app']
    """
    return BARE.findall(FENCE.sub("", text))


def test_at_most_five_ranklit_code_spans_are_not_links() -> None:
    found = {
        str(page.relative_to(DOCS)): spans
        for page in sorted(DOCS.rglob("*.md"))
        if page.name != "changelog.md" and (spans := bare_spans(page.read_text()))
    }
    assert sum(map(len, found.values())) <= 5, f"make these links ([`name`][name]): {found}"


def test_the_count_sees_a_bare_span_and_not_a_link() -> None:
    assert bare_spans("see `ranklit.metrics.RetrievalMetrics` and [`ranklit.losses`](api/losses/index.md)") == [
        "ranklit.metrics.RetrievalMetrics"
    ]
