"""The metrics table of the spec page and of the metrics' API page, generated at every docs build from the one place
each metric is declared: :data:`ranklit.functional.metrics.binary.BINARY_METRICS` (key, title, definition of each
binary metric) and :data:`ranklit.functional.relevance.HIERARCHICAL_METRICS` (the hierarchical ones). A page holds
the line ``<!-- metrics-table -->`` where the table goes (docs/gen_pages.py writes it; a test checks it)."""

from __future__ import annotations

from ranklit.functional.metrics.binary import BINARY_METRICS
from ranklit.functional.relevance import HIERARCHICAL_METRICS

MARKER = "<!-- metrics-table -->"


def metrics_table() -> str:
    """``| metric | key | definition |``: the binary metrics in table order, their per-level forms, the hierarchical
    metrics."""
    rows = ["| metric | key | definition |", "|---|---|---|"]
    rows += [f"| {m.title} | `{m.key}` | {m.definition} |" for m in BINARY_METRICS]
    rows.append(
        "| per-level metrics (hierarchical labels) | `map_level{h}`, … | every binary metric above with positive = "
        "same label in column $h$, for each column $h$ |"
    )
    rows += [f"| {title} | `{key}` | {definition} |" for key, title, definition in HIERARCHICAL_METRICS]
    return "\n".join(rows)


def fill(page: str) -> str:
    """``page`` with its marker line replaced by :func:`metrics_table`."""
    if MARKER not in page:
        raise SystemExit(f"docs/metric_tables.py: the page has no `{MARKER}` line")
    return page.replace(MARKER, metrics_table())
