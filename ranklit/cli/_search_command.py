"""``ranklit search --index I --query IMG|DIR --k 10 [--json] [--output grid.png]``: the best images of an index.

A query that the index holds (the same file, paths resolved) is left out of its own results unless
``--exclude_self false`` (or ``--no-exclude_self``). Prints each query's ranked paths and scores (cosine
similarities), or with ``--json`` a list of ``{"query", "results": [{"path", "score"}, ...]}``; ``--output`` draws
each query and its top k (:func:`ranklit.viz.ranking_grid`). Post-processing as in the landmark evaluation
(:mod:`ranklit.landmarks.postprocess`), in this order: ``--whiten`` (a PCA whitening learnt from the index itself,
``--whiten index``, or from a descriptor folder of ``ranklit predict``), ``--dba`` (database-side augmentation:
``O(N²·D)`` once, the index in memory) and ``--qe`` (α-QE).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ranklit.cli._export_command import CommandParser
from ranklit.cli._flags import add_boolean
from ranklit.deploy import BACKENDS
from ranklit.errors import UserError

if TYPE_CHECKING:  # imported after parsing (the landmark pipeline imports torchmetrics): `--help` is immediate
    from ranklit.deploy import Hit, Retriever
    from ranklit.landmarks.postprocess import PostProcessStep

__all__ = ["arguments", "main"]


def arguments() -> argparse.ArgumentParser:
    """The options of ``ranklit search``."""
    parser = CommandParser(prog="ranklit search", description=__doc__.splitlines()[0].replace("``", ""))
    parser.add_argument("--index", required=True, type=Path, help="the index folder of `ranklit index`")
    parser.add_argument("--query", required=True, type=Path, help="an image file, or a folder of images")
    parser.add_argument("--split", default=None, help="with a CSV of queries that has a `split` column: its rows to "
                        "use (e.g. query; `all`: every row)")
    parser.add_argument("--k", type=int, default=10, help="results per query")
    add_boolean(parser, "--exclude_self", default=True,
                help="leave a query that the index holds (the same file) out of its own results")
    add_boolean(parser, "--json", default=False, help="print JSON instead of text")
    parser.add_argument("--output", type=Path, default=None, help="draw the queries and their results (PNG)")
    parser.add_argument("--backend", choices=BACKENDS, default=None, help="exact, or the index's faiss kind")
    parser.add_argument("--nprobe", type=int, default=None, help="faiss ivf/pq cells visited per query")
    parser.add_argument("--whiten", default=None, help="learn a PCA whitening: `index` or a descriptor folder")
    parser.add_argument("--whiten_power", type=float, default=0.25, help="eigenvalue exponent (0.5: full)")
    parser.add_argument("--whiten_dim", type=int, default=None, help="whitened components kept")
    add_boolean(parser, "--dba", default=False, help="database-side augmentation")
    parser.add_argument("--dba_alpha", type=float, default=2.0, help="DBA similarity exponent")
    parser.add_argument("--dba_k", type=int, default=10, help="DBA neighbours")
    add_boolean(parser, "--qe", default=False, help="α-weighted query expansion")
    parser.add_argument("--qe_alpha", type=float, default=2.0, help="α-QE similarity exponent")
    parser.add_argument("--qe_k", type=int, default=10, help="α-QE neighbours")
    parser.add_argument("--device", default="cpu", help="where queries are embedded (cpu, cuda)")
    return parser


def _steps(options: argparse.Namespace) -> list[PostProcessStep]:
    from ranklit.landmarks.postprocess import AlphaQueryExpansion, DatabaseAugmentation, LearntWhitening

    steps: list[PostProcessStep] = []
    if options.whiten is not None:
        source = None if options.whiten == "index" else options.whiten
        steps.append(LearntWhitening(source, power=options.whiten_power, dim=options.whiten_dim))
    if options.dba:
        steps.append(DatabaseAugmentation(alpha=options.dba_alpha, k=options.dba_k))
    if options.qe:
        steps.append(AlphaQueryExpansion(alpha=options.qe_alpha, k=options.qe_k))
    return steps


def _queries(query: Path, split: str | None) -> list[str]:
    """An image file, or the images of a folder or CSV file (as ``ranklit index --images`` reads them)."""
    from ranklit.deploy import images_dataset

    if query.is_dir() or query.suffix.lower() == ".csv":
        return [str(p) for p in images_dataset(query, split=split).paths]  # type: ignore[attr-defined]
    if not query.is_file():
        raise UserError(f"query image {query} not found.")
    return [str(query)]


def _draw(retriever: Retriever, queries: list[str], hits: list[list[Hit]], output: Path) -> None:
    import torch

    from ranklit.viz import Retrieved, ranking_grid

    k = min(len(h) for h in hits)
    rows = torch.tensor([[hit.row for hit in h[:k]] for h in hits], dtype=torch.long)
    scores = torch.tensor([[hit.score for hit in h[:k]] for h in hits])
    path_of = {hit.row: hit.path for h in hits for hit in h}
    load = retriever.embed_inputs
    retrieved = Retrieved(indices=rows, scores=scores, levels=torch.zeros_like(rows), num_levels=0)
    preprocessing = retriever.card["preprocessing"]
    figure = ranking_grid(
        load(queries), retrieved, lambda positions: load([path_of[int(r)] for r in positions]),
        mean=preprocessing["mean"], std=preprocessing["std"],
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output)


def main(args: list[str]) -> None:
    """``ranklit search ...`` (``args`` after ``search``)."""
    options = arguments().parse_args(args)
    from ranklit.deploy import Retriever

    queries = _queries(options.query, options.split)
    retriever = Retriever.from_index(
        options.index, postprocess=_steps(options), backend=options.backend, nprobe=options.nprobe,
        device=options.device,
    )
    hits = retriever.search(queries, k=options.k, exclude_self=options.exclude_self)
    if options.json:
        results = [{"query": q, "results": [{"path": h.path, "score": h.score} for h in found]}
                   for q, found in zip(queries, hits, strict=True)]
        sys.stdout.write(json.dumps(results, indent=1) + "\n")
    else:
        for query, found in zip(queries, hits, strict=True):
            lines = [f"{rank:>4}  {hit.score:.4f}  {hit.path}" for rank, hit in enumerate(found, start=1)]
            sys.stdout.write("\n".join([f"query: {query}", *lines]) + "\n")
    if options.output is not None:
        _draw(retriever, queries, hits, options.output)
