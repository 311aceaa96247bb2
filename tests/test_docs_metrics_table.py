"""The metrics tables of the docs are generated from the metrics' declarations (docs/metric_tables.py): every key a
retrieval evaluation returns has its row, every formula renders, and no page keeps a hand-written copy."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import torch

from ranklit.functional import retrieval_metrics
from ranklit.metrics import list_metrics

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("_docs_metric_tables", ROOT / "docs" / "metric_tables.py")
assert _spec is not None and _spec.loader is not None
tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tables)
_math = importlib.util.spec_from_file_location("_docs_mathml", ROOT / "docs" / "mathml.py")
assert _math is not None and _math.loader is not None
mathml = importlib.util.module_from_spec(_math)
_math.loader.exec_module(mathml)


def _keys(table: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^\| [^|]+ \| `([^`]+)`", table, flags=re.M)}


def test_every_key_of_an_evaluation_has_its_row() -> None:
    gen = torch.Generator().manual_seed(0)
    labels = torch.stack([torch.arange(6).repeat(2), torch.arange(6).repeat(2) // 3], 1)
    result = retrieval_metrics(torch.randn(12, 4, generator=gen), labels, recall_at=(1, 3))
    documented = {re.sub(r"\{k\}", "1", key) for key in _keys(tables.metrics_table())}
    flat = {re.sub(r"_level\d+$", "", key) for key in result if not key.startswith("num_")}
    flat = {re.sub(r"_at_\d+$", "_at_1", key) if key.startswith(("recall", "ndcg")) else key for key in flat}
    assert flat <= documented | {"map_level{h}"}, flat - documented
    assert set(list_metrics(keys=True)) <= _keys(tables.metrics_table())


def test_the_pages_hold_the_marker_and_no_hand_written_table() -> None:
    for page in ("spec.md", "api/metrics/index.md"):
        text = (ROOT / "docs" / page).read_text()
        assert text.count(tables.MARKER) == 1, page
        assert "| `map_at_r` |" not in text and "| mAP@R |" not in text, f"{page} keeps a hand-written row"


def test_every_formula_of_the_table_renders() -> None:
    formulas = re.findall(r"\$([^$]+)\$", tables.metrics_table())
    assert len(formulas) > 10
    for tex in formulas:
        assert "<math" in mathml.to_mathml(tex)
