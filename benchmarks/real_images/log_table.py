"""The Markdown table of a ``compare.py --log`` file: one line per (method, settings), mean ± sd over its seeds.

Settings are written as their differences from ``--base`` (``issue``: issue 44's reference recipe, ``default``: the
benchmark's recipe), so each line says what was changed::

    python benchmarks/real_images/log_table.py benchmarks/real_images/experiments.jsonl --base issue

``--results`` prints instead ``compare.py``'s table (every metric, one line per method) of the log's runs, for a log
whose runs share one recipe (the seeds of one comparison run in several commands).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _recipe import ISSUE_RECIPE, Recipe


def difference(recipe: dict[str, object], base: Recipe) -> str:
    """``name=value`` for each setting that differs from ``base`` (``base`` when none does)."""
    reference = dataclasses.asdict(base)
    changed = [f"{k}={v}" for k, v in recipe.items() if k in reference and reference[k] != v]
    return ", ".join(changed) or "base"


def summary(lines: list[str], base: Recipe) -> str:
    """The table, in the order each (method, settings) first appears in the log."""
    groups: dict[tuple[str, str], list[dict[str, float]]] = {}
    for line in lines:
        if line.strip():
            record = json.loads(line)
            groups.setdefault((record["method"], difference(record["recipe"], base)), []).append(record)
    rows = ["| method | settings (vs base) | seeds | mAP@R | H-AP |", "|---|---|---:|---:|---:|"]
    for (method, settings), records in groups.items():
        cells = []
        for key in ("map_at_r", "hap"):
            values = [r[key] for r in records]
            sd = f" ± {statistics.stdev(values):.3f}" if len(values) > 1 else ""
            cells.append(f"{statistics.mean(values):.3f}{sd}")
        rows.append(f"| {method} | {settings} | {len(records)} | {cells[0]} | {cells[1]} |")
    return "\n".join(rows)


def results(lines: list[str]) -> str:
    """``compare.py``'s table of the runs, one line per method in ``compare.py``'s order; a setting missing from a
    record (logged before it existed) has its default value."""
    from compare import LOSSES, METRICS, UNTRAINED, table

    runs: dict[str, list[dict[str, float]]] = {}
    recipes = set()
    for line in lines:
        if line.strip():
            record = json.loads(line)
            recipes.add(json.dumps({**dataclasses.asdict(Recipe()), **record["recipe"]}, sort_keys=True))
            runs.setdefault(record["method"], []).append({key: record[key] for key in METRICS})
    if len(recipes) > 1:
        raise SystemExit(f"the log holds {len(recipes)} recipes; --results reads the runs of one")
    return table({method: runs[method] for method in (*UNTRAINED, *LOSSES) if method in runs})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--base", choices=("issue", "default"), default="default")
    parser.add_argument("--results", action="store_true", help="compare.py's table of a one-recipe log")
    args = parser.parse_args()
    if args.results:
        print(results(args.log.read_text().splitlines()))
        return
    print(summary(args.log.read_text().splitlines(), ISSUE_RECIPE if args.base == "issue" else Recipe()))


if __name__ == "__main__":
    main()
